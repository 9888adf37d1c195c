#include "server/json_fields.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace fp4moe::server {
namespace {

std::string name_of(std::string_view key, std::string_view param) {
    return std::string(param.empty() ? key : param);
}

/// The field, or null when absent.
const json *find(const json &obj, std::string_view key) {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return nullptr;
    return &*it;
}

[[noreturn]] void wrong_type(const std::string &param, const char *want, const json &v) {
    throw bad_request(fmt::format("{} must be {}, got {}", param, want, json_type_name(v)), param);
}

} // namespace

json parse_body(std::string_view body) {
    json j;
    try {
        j = json::parse(body.begin(), body.end());
    } catch (const json::parse_error &e) {
        // nlohmann's message quotes the token it stopped in ("last read: ..."), which can be the whole body: keep
        // the position and the reason only.
        std::string what = e.what();
        if (auto p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
        if (auto p = what.find("; last read"); p != std::string::npos) what = what.substr(0, p);
        throw bad_request(fmt::format("the request body is not valid JSON ({})", quote_for_message(what, 200)));
    } catch (const json::exception &e) {
        // number overflow (1e309) and the like
        throw bad_request(fmt::format("the request body is not valid JSON (a number out of range)"));
    }
    if (!j.is_object())
        throw bad_request(fmt::format("the request body must be a JSON object, got {}", json_type_name(j)));
    return j;
}

const char *json_type_name(const json &v) {
    switch (v.type()) {
    case json::value_t::string:
        return "a string";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
        return "an integer";
    case json::value_t::number_float:
        return "a number";
    case json::value_t::boolean:
        return "a boolean";
    case json::value_t::array:
        return "an array";
    case json::value_t::object:
        return "an object";
    default:
        return "null";
    }
}

std::optional<std::int64_t> get_int(const json &obj, std::string_view key, std::int64_t lo, std::int64_t hi,
                                    std::string_view param_name) {
    const json *v = find(obj, key);
    if (!v) return std::nullopt;
    const std::string param = name_of(key, param_name);
    auto out_of_range = [&](const std::string &got) -> api_error {
        if (hi == std::numeric_limits<std::int64_t>::max())
            return bad_request(fmt::format("{} must be at least {}, got {}", param, lo, got), param);
        return bad_request(fmt::format("{} must be in [{}, {}], got {}", param, lo, hi, got), param);
    };
    auto too_large = [&](const std::string &got) -> api_error {
        return bad_request(fmt::format("{} is out of range (a 64-bit integer), got {}", param, got), param);
    };
    std::int64_t x = 0;
    if (v->is_number_unsigned()) {
        const auto u = v->get<std::uint64_t>();
        if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
            throw too_large(std::to_string(u));
        x = static_cast<std::int64_t>(u);
    } else if (v->is_number_integer()) {
        x = v->get<std::int64_t>();
    } else if (v->is_number_float()) {
        const double d = v->get<double>();
        if (d != std::floor(d)) throw bad_request(fmt::format("{} must be an integer, got {}", param, d), param);
        // 2^63 is the first double past int64's range.
        if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0)) throw too_large(fmt::format("{}", d));
        x = static_cast<std::int64_t>(d);
    } else {
        wrong_type(param, "an integer", *v);
    }
    if (x < lo || x > hi) throw out_of_range(std::to_string(x));
    return x;
}

std::optional<float> get_float(const json &obj, std::string_view key, double lo, double hi,
                               std::string_view param_name) {
    const json *v = find(obj, key);
    if (!v) return std::nullopt;
    const std::string param = name_of(key, param_name);
    if (!v->is_number()) wrong_type(param, "a number", *v);
    const double d = v->get<double>();
    if (!std::isfinite(d) || d < lo || d > hi) {
        if (hi >= std::numeric_limits<float>::max())
            throw bad_request(fmt::format("{} must be at least {} (and finite), got {}", param, lo, d), param);
        throw bad_request(fmt::format("{} must be in [{}, {}], got {}", param, lo, hi, d), param);
    }
    return static_cast<float>(d);
}

std::optional<bool> get_bool(const json &obj, std::string_view key, std::string_view param_name) {
    const json *v = find(obj, key);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) wrong_type(name_of(key, param_name), "a boolean", *v);
    return v->get<bool>();
}

std::optional<std::string> get_string(const json &obj, std::string_view key, std::string_view param_name) {
    const json *v = find(obj, key);
    if (!v) return std::nullopt;
    if (!v->is_string()) wrong_type(name_of(key, param_name), "a string", *v);
    return v->get<std::string>();
}

std::optional<json> get_object(const json &obj, std::string_view key, std::string_view param_name) {
    const json *v = find(obj, key);
    if (!v) return std::nullopt;
    if (!v->is_object()) wrong_type(name_of(key, param_name), "an object", *v);
    return *v;
}

std::vector<std::string> get_stop(const json &obj, std::string_view key, std::size_t max_count, std::size_t max_bytes,
                                  std::string_view param_name) {
    const json *v = find(obj, key);
    if (!v) return {};
    const std::string param = name_of(key, param_name);
    std::vector<std::string> out;
    if (v->is_string()) {
        out.push_back(v->get<std::string>());
    } else if (v->is_array()) {
        if (v->size() > max_count)
            throw bad_request(fmt::format("{} has {} entries; at most {} are allowed", param, v->size(), max_count),
                              param);
        for (std::size_t i = 0; i < v->size(); ++i) {
            if (!(*v)[i].is_string()) wrong_type(fmt::format("{}[{}]", param, i), "a string", (*v)[i]);
            out.push_back((*v)[i].get<std::string>());
        }
    } else {
        wrong_type(param, "a string or an array of strings", *v);
    }
    for (std::size_t i = 0; i < out.size(); ++i) {
        if (out[i].empty()) throw bad_request(fmt::format("{} must not contain an empty string", param), param);
        if (out[i].size() > max_bytes)
            throw bad_request(
                fmt::format("{} entry {} is {} bytes long; at most {} are allowed", param, i, out[i].size(), max_bytes),
                param);
    }
    return out;
}

std::vector<std::int32_t> get_token_ids(const json &v, std::string_view param, std::int64_t vocab,
                                        std::size_t max_count) {
    if (!v.is_array()) wrong_type(std::string(param), "an array of token ids", v);
    if (v.size() > max_count)
        throw bad_request(fmt::format("{} has {} token ids; at most {} are allowed", param, v.size(), max_count),
                          std::string(param));
    std::vector<std::int32_t> ids;
    ids.reserve(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
        const json &e = v[i];
        if (!e.is_number_integer()) // also false for floats and booleans
            wrong_type(fmt::format("{}[{}]", param, i), "an integer token id", e);
        // Unsigned values past int64 read back as huge: compare as unsigned when non-negative.
        const bool negative = !e.is_number_unsigned() && e.get<std::int64_t>() < 0;
        if (negative || e.get<std::uint64_t>() >= static_cast<std::uint64_t>(vocab))
            throw bad_request(fmt::format("{}[{}] = {} is outside the vocabulary [0, {})", param, i, e.dump(), vocab),
                              std::string(param));
        ids.push_back(static_cast<std::int32_t>(e.get<std::int64_t>()));
    }
    return ids;
}

void refuse_if(bool present, std::string_view param, std::string_view why) {
    if (present) throw bad_request(fmt::format("{} is not supported: {}", param, why), std::string(param));
}

} // namespace fp4moe::server
