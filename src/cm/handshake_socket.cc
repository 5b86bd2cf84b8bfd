#include "cm/handshake_socket.h"

#include <cerrno>
#include <cstring>
#include <span>
#include <string>

#include "io/pcap_recorder.h"

namespace uwarp::cm {

HandshakeSocket::~HandshakeSocket() {
  // An attached fd is detached before it is closed (io::IoBackend).
  if (fd_.valid()) engine_.run_sync([this] { engine_.backend().detach(fd_.get()); });
}

void HandshakeSocket::receive_more() {
  if (rx_.size() < rx_used_ + kReadSize) rx_.resize(rx_used_ + kReadSize);
  engine_.backend().recv(fd_.get(), ByteSpan(rx_.data() + rx_used_, kReadSize));
}

void HandshakeSocket::send_frame(std::vector<std::uint8_t> frame) {
  const long n = io::send_bytes(fd_.get(), frame);
  if (n > 0) io::pcap_sent(fd_.get(), ConstByteSpan(frame).first(static_cast<std::size_t>(n)));
  if (n == static_cast<long>(frame.size())) return;
  tx_ = std::move(frame);
  const std::size_t sent = n > 0 ? static_cast<std::size_t>(n) : 0;
  tx_iov_ = iovec{tx_.data() + sent, tx_.size() - sent};
  engine_.backend().send(fd_.get(), std::span<const iovec>(&tx_iov_, 1));
}

void HandshakeSocket::on_connect(int error) {
  if (error == 0) {
    events_.handshake_connected(Status::ok());
    return;
  }
  events_.handshake_connected(Status(error == ECONNREFUSED ? Errc::kConnectionRefused : Errc::kIoError,
                                     std::string("connect: ") + std::strerror(error)));
}

void HandshakeSocket::on_recv(long result) {
  if (result > 0) {
    io::pcap_received(fd_.get(),
                      ConstByteSpan(rx_.data() + rx_used_, static_cast<std::size_t>(result)));
    rx_used_ += static_cast<std::size_t>(result);
    events_.handshake_received();
  } else if (result == 0) {
    events_.handshake_lost(Status(Errc::kConnectionReset, "peer closed during the MPA exchange"));
  } else {
    events_.handshake_lost(
        Status(Errc::kIoError, std::string("receive: ") + std::strerror(static_cast<int>(-result))));
  }
}

void HandshakeSocket::on_send(long result) {
  if (result < 0) return;  // the receive side reports the failure
  const auto n = static_cast<std::size_t>(result);
  io::pcap_sent(fd_.get(), ConstByteSpan(static_cast<const std::uint8_t*>(tx_iov_.iov_base), n));
  if (n < tx_iov_.iov_len) {
    tx_iov_.iov_base = static_cast<std::uint8_t*>(tx_iov_.iov_base) + n;
    tx_iov_.iov_len -= n;
    engine_.backend().send(fd_.get(), std::span<const iovec>(&tx_iov_, 1));
  }
}

io::Fd HandshakeSocket::hand_over() {
  deadline_.cancel();
  engine_.backend().detach(fd_.get());
  return std::move(fd_);
}

void HandshakeSocket::close() {
  deadline_.cancel();
  if (!fd_.valid()) return;
  engine_.backend().detach(fd_.get());
  fd_.reset();
}

}  // namespace uwarp::cm
