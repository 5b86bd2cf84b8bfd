// runtime::StreamReceiver over a scripted socket (no kernel, no threads): which receives it makes
// for large tagged payloads, and that what it receives lands where the headers put it.
#include "runtime/stream_receiver.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "proto/proto_test_util.h"
#include "support/qp_with_region.h"

namespace uwarp::runtime {
namespace {

using proto::testing::Bytes;

// A socket whose bytes arrive when the test says so. Each receive takes what has arrived, up to
// what it asks for, or says EAGAIN; the receives made are recorded.
class ScriptedSocket final : public io::IoBackend {
 public:
  struct Receive {
    bool into_buffer;  // try_recv(fd, ByteSpan); else scattered (try_recv(fd, iovecs))
    long got;
  };

  void arrive(ConstByteSpan bytes) { stream_.insert(stream_.end(), bytes.begin(), bytes.end()); }
  const std::vector<Receive>& receives() const { return receives_; }
  void forget_receives() { receives_.clear(); }

  long try_recv(int, ByteSpan into) override {
    iovec v{into.data(), into.size()};
    return take(std::span<const iovec>(&v, 1), true);
  }
  long try_recv(int, std::span<const iovec> into) override { return take(into, false); }

  Status attach(int, io::IoHandler*) override { return {}; }
  void detach(int) override {}
  void recv(int, ByteSpan) override {}
  void send(int, std::span<const iovec>) override {}
  void accept(int) override {}
  void watch_readable(int, bool, ByteSpan) override {}
  void watch_writable(int) override {}
  void connect_wait(int) override {}
  std::size_t run_once(std::chrono::microseconds) override { return 0; }
  void wake() override {}
  std::string_view name() const override { return "scripted"; }

 private:
  long take(std::span<const iovec> into, bool into_buffer) {
    std::size_t got = 0;
    for (const iovec& v : into) {
      const std::size_t n = std::min(v.iov_len, stream_.size() - at_);
      std::memcpy(v.iov_base, stream_.data() + at_, n);
      at_ += n;
      got += n;
    }
    const long result = got > 0 ? static_cast<long>(got) : -EAGAIN;
    receives_.push_back({into_buffer, result});
    return result;
  }

  Bytes stream_;
  std::size_t at_ = 0;
  std::vector<Receive> receives_;
};

class NullLink final : public verbs::QpLink {
 public:
  void doorbell(verbs::QueuePair&, verbs::Doorbell) override {}
  void settle_send(verbs::QueuePair&) override {}
  void revoke(verbs::QueuePair&, const proto::RevokedRegion&, bool) override {}
  void receive_posted(verbs::QueuePair&) override {}
};

class StreamReceiverTest : public testing::QpWithRegion {
 protected:
  static constexpr std::size_t kPayload = 60000;  // one FPDU of a large Write

  StreamReceiverTest() : QpWithRegion(2 * kPayload, 0, access::kLocalWrite | access::kRemoteWrite) {
    verbs::LinkParams p;
    p.max_ulpdu = 65000;
    p.ird = 4;
    p.ord = 4;
    MutexLock lock(qp_->mutex());
    rdmap_ = std::make_unique<RdmapDriver>(*qp_, &link_, p);
  }

  // A Write of one FPDU placing `payload` at `offset` of the region.
  Bytes write_fpdu(const Bytes& payload, std::size_t offset) const {
    return proto::testing::fpdu(
        proto::testing::tagged_header(wire::RdmapOpcode::kRdmaWrite, mr_->stag, mr_->iova + offset),
        payload, false);
  }
  StreamReceiver::Outcome receive() {
    MutexLock lock(qp_->mutex());
    return rx_.receive(*qp_, *rdmap_);
  }

  NullLink link_;
  std::unique_ptr<RdmapDriver> rdmap_;
  ScriptedSocket socket_;
  StreamReceiver rx_{socket_, 3};
};

TEST_F(StreamReceiverTest, AfterAPayloadPlacedInPlaceAnEmptySocketKeepsTheNextHeaderReadSmall) {
  const Bytes first = proto::testing::pattern(kPayload, 1);
  const Bytes second = proto::testing::pattern(kPayload, 2);

  socket_.arrive(write_fpdu(first, 0));
  EXPECT_FALSE(receive().ended);
  ASSERT_TRUE(std::equal(first.begin(), first.end(), memory_.begin()));
  const auto& r = socket_.receives();
  ASSERT_TRUE(std::any_of(r.begin(), r.end(), [](const auto& x) { return !x.into_buffer; }))
      << "the payload was not received in place";

  // The socket stays empty for a while (the sender is between messages): receives find nothing.
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(receive().progress);

  // The next Write's header must be read into a buffer; its payload should not come with it
  // (that would be copied a second time), so the read asks for little.
  socket_.forget_receives();
  socket_.arrive(write_fpdu(second, kPayload));
  EXPECT_TRUE(receive().progress);
  ASSERT_TRUE(std::equal(second.begin(), second.end(), memory_.begin() + kPayload));
  ASSERT_FALSE(r.empty());
  std::size_t into_buffers = 0;
  for (const auto& x : r) {
    if (x.into_buffer && x.got > 0) into_buffers += static_cast<std::size_t>(x.got);
  }
  EXPECT_LE(into_buffers, StreamReceiver::kSmallRead)
      << "bytes of the second payload went through a buffer";
}

}  // namespace
}  // namespace uwarp::runtime
