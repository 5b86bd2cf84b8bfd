#include "stats/proc.h"

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>

namespace uwarp::stats {

std::optional<std::uint64_t> process_start_ticks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  if (!in) return std::nullopt;
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The name (field 2) is in parentheses and may hold spaces and parentheses: fields 3 on
  // follow the last ')'.
  const std::size_t close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(close + 1));
  std::string field;
  for (int n = 3; n <= 22; ++n) {
    if (!(fields >> field)) return std::nullopt;
  }
  return std::strtoull(field.c_str(), nullptr, 10);
}

std::string process_name(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

}  // namespace uwarp::stats
