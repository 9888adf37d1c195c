// Two-panel SVG plot pieces (svg.h).
#include "core/svg.h"

#include <fmt/format.h>

namespace fp4moe::svg {

std::string open(int width, int height, std::string_view title) {
    return fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
                       "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
                       "fill=\"white\"/>\n<text x=\"{}\" y=\"24\" font-size=\"15\" text-anchor=\"middle\">{}</text>\n",
                       width, height, width / 2, title);
}

std::string panel(int left, int top, int pw, int ph, std::string_view title, std::string_view x_label) {
    return fmt::format("<rect x=\"{0}\" y=\"{1}\" width=\"{2}\" height=\"{3}\" fill=\"none\" stroke=\"#444\"/>\n"
                       "<text x=\"{4}\" y=\"{5}\" text-anchor=\"middle\">{6}</text>\n"
                       "<text x=\"{4}\" y=\"{7}\" text-anchor=\"middle\">{8}</text>\n",
                       left, top, pw, ph, left + pw / 2, top - 8, title, top + ph + 36, x_label);
}

std::string x_tick(double x, int top, int bottom, std::string_view label) {
    return fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#ddd\"/>"
                       "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
                       x, top, bottom, bottom + 16, label);
}

std::string y_tick(double y, int left, int right, std::string_view label) {
    return fmt::format("<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/>"
                       "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>\n",
                       left, y, right, left - 6, y + 4, label);
}

} // namespace fp4moe::svg
