#include "rdmacm/mpa_choice.h"

#include <charconv>
#include <string>

namespace uwarp::rdmacm {

Result<MpaChoice> parse_mpa_choice(std::string_view text) {
  MpaChoice c;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view word = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    if (word == "crc") {
      c.crc = true;
    } else if (word == "markers") {
      c.markers = true;
    } else if (word == "p2p" || word == "p2p-write" || word == "p2p-read") {
      c.peer_to_peer = true;
      c.rtr_offer = word == "p2p"         ? RtrOffer::kWriteOrRead
                    : word == "p2p-write" ? RtrOffer::kWrite
                                          : RtrOffer::kRead;
    } else if (word == "rev1") {
      c.revision = 1;
    } else if (word.starts_with("fpdu=")) {
      const std::string_view digits = word.substr(5);
      std::uint32_t n = 0;
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
      if (ec != std::errc{} || end != digits.data() + digits.size() || digits.empty() ||
          n > kMaxFpduSize) {
        return error(Errc::kInvalidArgument,
                     "'" + std::string(word) + "': fpdu= takes a size in bytes, at most " +
                         std::to_string(kMaxFpduSize));
      }
      c.fpdu_size = n;
    } else if (!word.empty()) {
      return error(Errc::kInvalidArgument, "unknown word '" + std::string(word) +
                                               "' (crc, markers, p2p, p2p-write, p2p-read, rev1, fpdu=N)");
    }
  }
  if (c.peer_to_peer && c.revision == 1) {
    return error(Errc::kInvalidArgument, "p2p needs MPA revision 2 (not with rev1)");
  }
  return c;
}

}  // namespace uwarp::rdmacm
