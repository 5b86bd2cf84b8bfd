#include "cm/handshake_socket.h"

#include <span>

namespace uwarp::cm {

void HandshakeSocket::set_deadline(runtime::Clock::time_point deadline,
                                   std::function<void()> expired) {
  timer_ = engine_.add_timer(deadline, std::move(expired));
}

void HandshakeSocket::cancel_deadline() {
  if (timer_ != 0) engine_.cancel_timer(timer_);
  timer_ = 0;
}

void HandshakeSocket::receive_more() {
  if (rx_.size() < rx_used_ + kReadSize) rx_.resize(rx_used_ + kReadSize);
  engine_.backend().recv(fd_.get(), ByteSpan(rx_.data() + rx_used_, kReadSize));
}

void HandshakeSocket::send_frame(std::vector<std::uint8_t> frame) {
  const long n = io::send_bytes(fd_.get(), frame);
  if (n == static_cast<long>(frame.size())) return;
  tx_ = std::move(frame);
  const std::size_t sent = n > 0 ? static_cast<std::size_t>(n) : 0;
  tx_iov_ = iovec{tx_.data() + sent, tx_.size() - sent};
  engine_.backend().send(fd_.get(), std::span<const iovec>(&tx_iov_, 1));
}

void HandshakeSocket::on_send(long result) {
  if (result < 0) return;  // the receive side reports the failure
  const auto n = static_cast<std::size_t>(result);
  if (n < tx_iov_.iov_len) {
    tx_iov_.iov_base = static_cast<std::uint8_t*>(tx_iov_.iov_base) + n;
    tx_iov_.iov_len -= n;
    engine_.backend().send(fd_.get(), std::span<const iovec>(&tx_iov_, 1));
  }
}

io::Fd HandshakeSocket::hand_over() {
  cancel_deadline();
  engine_.backend().detach(fd_.get());
  return std::move(fd_);
}

void HandshakeSocket::close() {
  cancel_deadline();
  if (!fd_.valid()) return;
  engine_.backend().detach(fd_.get());
  fd_.reset();
}

}  // namespace uwarp::cm
