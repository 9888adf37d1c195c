// Weight-only NVFP4 quantization of a Hugging Face checkpoint (see quantize_checkpoint.h).
#include "model/quantize_checkpoint.h"

#include "core/error.h"
#include "fp4moe/safetensors.h"
#include "model/config.h"
#include "model/inspect.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

namespace fp4moe {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

constexpr std::uint64_t kCopyChunk = 64u << 20;

std::vector<std::string> split(const std::string &s) {
    std::vector<std::string> out;
    std::size_t b = 0;
    for (std::size_t e; (e = s.find('.', b)) != std::string::npos; b = e + 1) out.push_back(s.substr(b, e - b));
    out.push_back(s.substr(b));
    return out;
}

bool is_index(const std::string &s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return c >= '0' && c <= '9'; });
}

float half_to_float(std::uint16_t h) {
    const std::uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1F, man = h & 0x3FF;
    if (exp == 0) return (sign ? -1.0f : 1.0f) * std::ldexp(static_cast<float>(man), -24);
    if (exp == 31) return std::bit_cast<float>(sign | 0x7F800000u | (man << 13));
    return std::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13));
}

std::vector<float> to_float(const checkpoint::entry &e) {
    const auto data = e.data();
    const auto n = static_cast<std::size_t>(e.info->numel());
    std::vector<float> f(n);
    switch (e.info->type) {
    case dtype::bf16:
        for (std::size_t i = 0; i < n; ++i) {
            bf16_t h;
            std::memcpy(&h.bits, data.data() + 2 * i, 2);
            f[i] = bf16_to_float(h);
        }
        break;
    case dtype::f16:
        for (std::size_t i = 0; i < n; ++i) {
            std::uint16_t h;
            std::memcpy(&h, data.data() + 2 * i, 2);
            f[i] = half_to_float(h);
        }
        break;
    case dtype::f32:
        std::memcpy(f.data(), data.data(), 4 * n);
        break;
    default:
        fail(status_code::unsupported, "{}: dtype {} cannot be quantized (bf16, f16 or f32)", e.info->name,
             dtype_name(e.info->type));
    }
    return f;
}

// The MLP Linear modules this command may quantize: experts, shared experts and (with dense_mlp) dense MLPs
// of the decoder layers [0, num_layers).
bool quantizable(const std::string &module, std::int64_t num_layers, bool dense_mlp) {
    const auto p = split(module);
    if (p.size() < 5 || p[0] != "model" || p[1] != "layers" || !is_index(p[2]) || p[3] != "mlp") return false;
    if (std::stoll(p[2]) >= num_layers) return false;
    const std::string &leaf = p.back();
    if (leaf != "gate_proj" && leaf != "up_proj" && leaf != "down_proj") return false;
    if (p.size() == 5) return dense_mlp;
    if (p.size() == 6) return p[4] == "shared_experts";
    return p.size() == 7 && p[4] == "experts" && is_index(p[5]);
}

void write_text(const fs::path &path, const std::string &text) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    if (!f) fail(status_code::io_error, "{}: cannot create", path.string());
    f.write(text.data(), static_cast<std::streamsize>(text.size()));
    f.close();
    if (!f) fail(status_code::io_error, "{}: write failed", path.string());
}

ojson read_json(const fs::path &path) {
    std::ifstream in(path);
    if (!in) fail(status_code::not_found, "{}: cannot open", path.string());
    try {
        return ojson::parse(in);
    } catch (const std::exception &e) {
        fail(status_code::corrupt, "{}: not valid JSON: {}", path.string(), e.what());
    }
}

struct trie {
    std::map<std::string, trie> kids;
    bool leaf = false, has_q = false, has_bf16 = false; // over the subtree
};

} // namespace

std::vector<std::string> summarize_exclusions(const std::vector<std::string> &bf16,
                                              const std::vector<std::string> &quantized, std::int64_t num_layers) {
    auto generalize = [&](const std::string &m) {
        auto p = split(m);
        if (p.size() > 2 && p[0] == "model" && p[1] == "layers" && is_index(p[2]) && std::stoll(p[2]) < num_layers)
            p[2].assign(1, '*');
        for (std::size_t i = 1; i < p.size(); ++i)
            if (p[i - 1] == "experts" && is_index(p[i])) p[i].assign(1, '*');
        return p;
    };
    trie root;
    std::map<std::string, std::vector<std::string>> exact; // generalized name -> bf16 modules
    auto insert = [&](const std::string &m, bool q) {
        const auto p = generalize(m);
        trie *t = &root;
        (q ? t->has_q : t->has_bf16) = true;
        std::string g;
        for (const auto &c : p) {
            t = &t->kids[c];
            (q ? t->has_q : t->has_bf16) = true;
            if (!g.empty()) g.push_back('.');
            g.append(c);
        }
        t->leaf = true;
        if (!q) exact[g].push_back(m);
    };
    for (const auto &m : bf16) insert(m, false);
    for (const auto &m : quantized) insert(m, true);

    std::vector<std::string> out;
    auto clashes = [&](const std::string &pattern) {
        return std::any_of(quantized.begin(), quantized.end(),
                           [&](const std::string &q) { return module_pattern_match(pattern, q); });
    };
    auto walk = [&](auto &self, const trie &t, const std::string &path) -> void {
        if (!t.has_bf16) return;
        if (!t.has_q && !path.empty()) {
            std::string pattern = path;
            if (!t.kids.empty()) pattern.push_back('*');
            if (!clashes(pattern)) {
                out.push_back(pattern);
                return;
            }
        }
        if (t.leaf && t.kids.empty()) { // mixed or clashing leaf: name the modules one by one
            for (const auto &m : exact[path]) out.push_back(m);
            return;
        }
        if (t.leaf)
            for (const auto &m : exact[path]) out.push_back(m);
        for (const auto &[name, kid] : t.kids) self(self, kid, path.empty() ? name : path + "." + name);
    };
    walk(walk, root, "");
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

result<checkpoint_write_report> quantize_checkpoint(const quantize_options &o) {
    checkpoint_write_report rep;
    const status st = catch_status([&] {
        auto cfg_r = load_model_config(o.in);
        if (!cfg_r.ok()) throw error(cfg_r.get_status().code(), cfg_r.get_status().message());
        const model_config &cfg = cfg_r.value();
        if (cfg.quant.nvfp4())
            fail(status_code::invalid_argument, "{}: already quantized ({} in {})", o.in, cfg.quant.quant_algo,
                 cfg.quant.source);
        std::error_code ec;
        if (fs::exists(o.out, ec) && fs::equivalent(o.in, o.out, ec))
            fail(status_code::invalid_argument, "--out {} is the input directory", o.out);
        if (o.shard_size == 0) fail(status_code::invalid_argument, "--shard-size must be positive");
        auto ck_r = checkpoint::open(o.in);
        if (!ck_r.ok()) throw error(ck_r.get_status().code(), ck_r.get_status().message());
        const checkpoint &ck = ck_r.value();

        // Decide every Linear module (a 2-D "<module>.weight" other than an embedding).
        std::set<std::string> qset;
        std::vector<std::string> bf16_modules, q_modules;
        for (const auto &e : ck.tensors()) {
            const std::string &n = e.info->name;
            if (!n.ends_with(".weight") || e.info->shape.size() != 2 || n.find("embed_tokens") != std::string::npos)
                continue;
            const std::string module = n.substr(0, n.size() - 7);
            bool q = quantizable(module, cfg.num_layers, o.dense_mlp);
            for (const auto &pat : o.exclude)
                if (module_pattern_match(pat, module)) q = false;
            if (q && e.info->shape[1] % nvfp4::kBlock)
                fail(status_code::invalid_argument, "{}: K = {} is not a multiple of 16; exclude it with --exclude", n,
                     e.info->shape[1]);
            (q ? q_modules : bf16_modules).push_back(module);
            if (q) qset.insert(module);
        }
        if (q_modules.empty())
            fail(status_code::invalid_argument, "{}: no expert weights to quantize (all excluded?)", o.in);
        const auto exclude = summarize_exclusions(bf16_modules, q_modules, cfg.num_layers);

        // Units in tensor-name order; gate/up pairs at the gate's place.
        std::vector<write_unit> units;
        for (const auto &e : ck.tensors()) {
            const std::string &n = e.info->name;
            const std::string module = n.ends_with(".weight") ? n.substr(0, n.size() - 7) : std::string();
            if (!module.empty() && qset.count(module)) {
                std::string sibling;
                if (module.ends_with(".up_proj") && qset.count(module.substr(0, module.size() - 7) + "gate_proj"))
                    continue; // written with its gate_proj
                if (module.ends_with(".gate_proj") && qset.count(module.substr(0, module.size() - 9) + "up_proj"))
                    sibling = module.substr(0, module.size() - 9) + "up_proj";
                std::vector<checkpoint::entry> src = {e};
                if (!sibling.empty()) {
                    src.push_back(ck.find(sibling + ".weight"));
                    if (src[1].info->shape != e.info->shape)
                        fail(status_code::invalid_argument, "{}: shape differs from {}", sibling, module);
                }
                write_unit u;
                const std::int64_t rows = e.info->shape[0], cols = e.info->shape[1];
                for (const auto &s : src) {
                    const std::string &sn = s.info->name;
                    auto specs = nvfp4_tensor_specs(sn.substr(0, sn.size() - 7), rows, cols, false);
                    u.tensors.insert(u.tensors.end(), specs.begin(), specs.end());
                }
                u.produce = [src, rows, cols](int, std::span<const std::span<std::byte>> out) {
                    std::vector<std::vector<float>> w;
                    float amax = 0.0f;
                    for (const auto &s : src) {
                        w.push_back(to_float(s));
                        for (float x : w.back()) amax = std::max(amax, std::fabs(x));
                    }
                    for (std::size_t k = 0; k < src.size(); ++k) {
                        auto m = nvfp4::quantize(std::span<const float>(w[k]), rows, cols, amax);
                        if (!m.ok()) fail(m.get_status().code(), "{}: {}", src[k].info->name, m.get_status().message());
                        store_nvfp4(m.value(), 0.0f, out.subspan(3 * k, 3));
                    }
                };
                rep.nvfp4_groups += static_cast<std::int64_t>(src.size());
                units.push_back(std::move(u));
                continue;
            }
            write_unit u; // copied as is
            u.tensors.push_back({n, e.info->type, e.info->shape});
            const std::uint64_t bytes = e.info->nbytes();
            u.chunks = static_cast<int>(std::max<std::uint64_t>(1, (bytes + kCopyChunk - 1) / kCopyChunk));
            u.produce = [e, bytes](int c, std::span<const std::span<std::byte>> out) {
                const std::uint64_t b = static_cast<std::uint64_t>(c) * kCopyChunk,
                                    len = std::min(bytes, b + kCopyChunk) - b;
                if (len) std::memcpy(out[0].data() + b, e.data().data() + b, len);
            };
            units.push_back(std::move(u));
        }

        if (auto ps = prepare_output_dir(o.out, o.force); !ps.ok()) throw error(ps.code(), ps.message());
        const fs::path in(o.in), out(o.out);
        const ojson producer = {{"name", "modelopt"}, {"version", "0.37.0+fp4moe.weightonly"}};
        ojson hf_quant = {{"producer", producer},
                          {"quantization",
                           {{"quant_algo", "W4A16_NVFP4"},
                            {"kv_cache_quant_algo", nullptr},
                            {"group_size", 16},
                            {"exclude_modules", exclude}}}};
        ojson config = read_json(in / "config.json");
        config["quantization_config"] = {
            {"ignore", exclude}, {"quant_algo", "W4A16_NVFP4"}, {"producer", producer}, {"quant_method", "modelopt"}};
        write_text(out / "config.json", config.dump(2) + "\n");
        write_text(out / "hf_quant_config.json", hf_quant.dump(2) + "\n");
        for (const auto &f : fs::directory_iterator(in)) {
            const std::string name = f.path().filename().string();
            if (!f.is_regular_file() || name == "config.json" || name == "hf_quant_config.json" ||
                name.ends_with(".safetensors") || name == "model.safetensors.index.json")
                continue;
            fs::copy_file(f.path(), out / name, fs::copy_options::overwrite_existing, ec);
            if (ec) fail(status_code::io_error, "{}: cannot copy to {}: {}", f.path().string(), o.out, ec.message());
        }

        sharded_write_options w;
        w.shard_size = o.shard_size;
        w.threads = o.threads;
        w.progress = o.progress;
        w.label = "quantize";
        const std::int64_t groups = rep.nvfp4_groups;
        auto wr = write_sharded_checkpoint(o.out, units, w);
        if (!wr.ok()) throw error(wr.get_status().code(), wr.get_status().message());
        rep = wr.value();
        rep.nvfp4_groups = groups;

        // Self-check: the exclusion list as loaders read it gives exactly what was written.
        auto cfg2 = load_model_config(o.out);
        if (!cfg2.ok()) fail(status_code::internal, "written config does not load: {}", cfg2.get_status().message());
        for (const auto &m : q_modules)
            if (!cfg2.value().quant.module_is_nvfp4(m))
                fail(status_code::internal, "exclude_modules wrongly covers quantized module {}", m);
        for (const auto &m : bf16_modules)
            if (cfg2.value().quant.module_is_nvfp4(m))
                fail(status_code::internal, "exclude_modules misses bf16 module {}", m);
        auto ck2 = checkpoint::open(o.out);
        if (!ck2.ok()) fail(status_code::internal, "written checkpoint does not open: {}", ck2.get_status().message());
        const auto sum = summarize_checkpoint(ck2.value());
        if (!sum.problems.empty() || static_cast<std::int64_t>(sum.nvfp4.size()) != groups)
            fail(status_code::internal, "written checkpoint has {} NVFP4 groups ({} expected) and {} problems",
                 sum.nvfp4.size(), groups, sum.problems.size());
    });
    if (!st.ok()) return st;
    return rep;
}

} // namespace fp4moe
