//===- Heartbeat.cpp - Ranks watching each other over UDP -----------------===//
//
// See Heartbeat.h. Each rank's address is exchanged as a fixed-size record
// (host name, IPv4 address, port) so that one all-gather carries it. The
// thread sleeps in poll() on its socket and on a pipe that the destructor
// writes to, so that stopping never waits for a period.
//
//===----------------------------------------------------------------------===//

#include "runtime/Heartbeat.h"
#include "runtime/Backend.h"
#include "runtime/RunMetrics.h"
#include "runtime/TrainReports.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"

#include <arpa/inet.h>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace autopar;
using namespace llvm;

namespace {

using Clock = std::chrono::steady_clock;

/// One rank's address as exchanged: host name, IPv4 address, port.
struct AddressRecord {
  char Host[64];
  uint32_t Ip;   // network order
  uint16_t Port; // network order
  uint16_t Pad;
};
static_assert(sizeof(AddressRecord) == 72, "fixed-size record");

/// This host's IPv4 address: its name's, else the loopback.
uint32_t getOwnAddress(const std::string &Host) {
  addrinfo Hints;
  std::memset(&Hints, 0, sizeof(Hints));
  Hints.ai_family = AF_INET;
  Hints.ai_socktype = SOCK_DGRAM;
  addrinfo *Found = nullptr;
  uint32_t Ip = htonl(INADDR_LOOPBACK);
  if (::getaddrinfo(Host.c_str(), nullptr, &Hints, &Found) == 0 && Found) {
    Ip = reinterpret_cast<sockaddr_in *>(Found->ai_addr)->sin_addr.s_addr;
    ::freeaddrinfo(Found);
  }
  return Ip;
}

Error systemError(const Twine &What) {
  return createStringError(inconvertibleErrorCode(), "--heartbeat: " + What +
                                                         ": " +
                                                         std::strerror(errno));
}

} // namespace

struct HeartbeatMonitor::Impl {
  int Rank = 0, NumRanks = 1;
  double Period = 1;
  int Socket = -1;
  int Wake[2] = {-1, -1};
  std::vector<AddressRecord> Addresses;
  std::vector<std::string> Hosts;
  ActivityFn Activity;
  LostFn OnLost;
  std::atomic<int64_t> Step{0};
  std::thread Thread;

  /// What the ranks watched last said and when.
  struct Heard {
    Clock::time_point At;
    int64_t Step = 0;
    std::string Activity = "starting";
    /// Said goodbye: its run is over, it is watched no more.
    bool Done = false;
  };
  std::vector<Heard> Last;

  ~Impl() {
    if (Socket >= 0)
      ::close(Socket);
    for (int Fd : Wake)
      if (Fd >= 0)
        ::close(Fd);
  }

  void send(int To, const std::string &Text) {
    sockaddr_in A;
    std::memset(&A, 0, sizeof(A));
    A.sin_family = AF_INET;
    A.sin_addr.s_addr = Addresses[To].Ip;
    A.sin_port = Addresses[To].Port;
    // A lost datagram is a missed beat; the next one may arrive.
    (void)::sendto(Socket, Text.data(), Text.size(), MSG_DONTWAIT,
                   reinterpret_cast<sockaddr *>(&A), sizeof(A));
  }

  /// Sends Text to the ranks that watch this one: every rank from rank 0,
  /// rank 0 from the others.
  void sendToWatchers(const std::string &Text) {
    if (Rank != 0) {
      send(0, Text);
      return;
    }
    for (int R = 1; R < NumRanks; ++R)
      send(R, Text);
  }

  void beat() {
    std::string Text = "autopar-heartbeat " + std::to_string(Rank) + " " +
                       std::to_string(Step.load()) + " " + Activity();
    if (Text.size() > 1000)
      Text.resize(1000);
    sendToWatchers(Text);
  }

  void receive() {
    char Buffer[1100];
    for (;;) {
      ssize_t N = ::recv(Socket, Buffer, sizeof(Buffer), MSG_DONTWAIT);
      if (N <= 0)
        return;
      StringRef Text(Buffer, size_t(N));
      int From;
      if (Text.consume_front("autopar-heartbeat-done ")) {
        if (!Text.getAsInteger(10, From) && From >= 0 && From < NumRanks)
          Last[From].Done = true;
        continue;
      }
      if (!Text.consume_front("autopar-heartbeat "))
        continue;
      auto [RankText, Rest] = Text.split(' ');
      auto [StepText, What] = Rest.split(' ');
      int64_t S;
      if (RankText.getAsInteger(10, From) || From < 0 || From >= NumRanks ||
          StepText.getAsInteger(10, S))
        continue;
      Last[From].At = Clock::now();
      Last[From].Step = S;
      Last[From].Activity = What.str();
    }
  }

  /// Tells the ranks that watch this one that its run is over.
  void sayDone() {
    sendToWatchers("autopar-heartbeat-done " + std::to_string(Rank));
  }

  void run() {
    auto Tick = std::chrono::duration<double>(Period / 4);
    Clock::time_point NextBeat = Clock::now();
    for (;;) {
      Clock::time_point Now = Clock::now();
      if (Now >= NextBeat) {
        beat();
        NextBeat += std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double>(Period));
        if (NextBeat < Now)
          NextBeat = Now;
      }
      receive();
      Now = Clock::now();
      for (int R = 0; R != NumRanks; ++R) {
        if (R == Rank || (Rank != 0 && R != 0) || Last[R].Done)
          continue;
        double Silent = std::chrono::duration<double>(Now - Last[R].At).count();
        if (Silent > 1.5 * Period) {
          HeartbeatLoss L;
          L.Rank = R;
          L.Host = Hosts[R];
          L.Activity = Last[R].Activity;
          L.Step = Last[R].Step;
          L.SilentSeconds = Silent;
          // The ranks watching this one stop watching: it ends the job,
          // and they must not report it lost as it goes.
          sayDone();
          OnLost(L);
          return;
        }
      }
      pollfd Fds[2] = {{Socket, POLLIN, 0}, {Wake[0], POLLIN, 0}};
      int Ms = int(std::chrono::duration<double, std::milli>(Tick).count());
      int Ready = ::poll(Fds, 2, std::max(Ms, 1));
      if (Ready > 0 && (Fds[1].revents & POLLIN)) {
        sayDone();
        return;
      }
    }
  }
};

Expected<std::unique_ptr<HeartbeatMonitor>>
HeartbeatMonitor::start(Backend &B, double PeriodSeconds, ActivityFn Activity,
                        LostFn OnLost) {
  auto I = std::make_unique<Impl>();
  Communicator &Comm = B.getCommunicator();
  I->Rank = Comm.getRank();
  I->NumRanks = Comm.getNumRanks();
  I->Period = PeriodSeconds;
  I->Activity = std::move(Activity);
  I->OnLost = std::move(OnLost);
  I->Socket = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (I->Socket < 0)
    return systemError("cannot open a UDP socket");
  sockaddr_in Any;
  std::memset(&Any, 0, sizeof(Any));
  Any.sin_family = AF_INET;
  Any.sin_addr.s_addr = htonl(INADDR_ANY);
  Any.sin_port = 0;
  if (::bind(I->Socket, reinterpret_cast<sockaddr *>(&Any), sizeof(Any)) != 0)
    return systemError("cannot bind a UDP socket");
  socklen_t Length = sizeof(Any);
  if (::getsockname(I->Socket, reinterpret_cast<sockaddr *>(&Any), &Length))
    return systemError("cannot read the UDP socket's port");
  if (::pipe2(I->Wake, O_CLOEXEC) != 0)
    return systemError("cannot make a pipe");

  AddressRecord Mine;
  std::memset(&Mine, 0, sizeof(Mine));
  std::string Host = getHostName();
  std::strncpy(Mine.Host, Host.c_str(), sizeof(Mine.Host) - 1);
  Mine.Ip = getOwnAddress(Host);
  Mine.Port = Any.sin_port;
  Expected<std::vector<uint8_t>> All =
      gatherBytes(B, ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(&Mine),
                                       sizeof(Mine)));
  if (!All)
    return createStringError(inconvertibleErrorCode(),
                             "--heartbeat: exchanging the ranks' addresses: " +
                                 toString(All.takeError()));
  I->Addresses.resize(I->NumRanks);
  std::memcpy(I->Addresses.data(), All->data(),
              sizeof(AddressRecord) * size_t(I->NumRanks));
  for (AddressRecord &A : I->Addresses) {
    A.Host[sizeof(A.Host) - 1] = 0;
    I->Hosts.push_back(A.Host);
  }
  I->Last.resize(I->NumRanks);
  Clock::time_point Now = Clock::now();
  for (Impl::Heard &H : I->Last)
    H.At = Now;
  Impl *Raw = I.get();
  if (I->NumRanks > 1)
    I->Thread = std::thread([Raw] { Raw->run(); });
  return std::unique_ptr<HeartbeatMonitor>(new HeartbeatMonitor(std::move(I)));
}

HeartbeatMonitor::HeartbeatMonitor(std::unique_ptr<Impl> I) : P(std::move(I)) {}

HeartbeatMonitor::~HeartbeatMonitor() {
  char One = 1;
  (void)!::write(P->Wake[1], &One, 1);
  if (P->Thread.joinable())
    P->Thread.join();
}

void HeartbeatMonitor::setStep(int64_t Step) { P->Step = Step; }
