// Pieces of the two-panel SVG plots the benchmarks write (`bench moe --plot`, `bench serve --plot`): the document
// with its title, a panel's frame and labels, and grid lines with their tick labels. Plain strings, no state.
#pragma once

#include <string>
#include <string_view>

namespace fp4moe::svg {

/// The opening of a W x H document on a white background with a centered title (close it with "</svg>\n").
std::string open(int width, int height, std::string_view title);
/// A panel's frame at (left, top) of pw x ph, its title above and its x-axis label below.
std::string panel(int left, int top, int pw, int ph, std::string_view title, std::string_view x_label);
/// A vertical grid line at x from top to bottom, labelled below by `label`.
std::string x_tick(double x, int top, int bottom, std::string_view label);
/// A horizontal grid line at y from left to right, labelled left of the panel by `label`.
std::string y_tick(double y, int left, int right, std::string_view label);

} // namespace fp4moe::svg
