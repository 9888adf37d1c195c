#include "commands.h"
void fp4moe::tools::register_inspect(CLI::App &, command_registry &) {}
