//===- MetricsServer.cpp - Prometheus text of a running job ---------------===//
//
// See MetricsServer.h. The server thread reads the latest records under a
// mutex; the training loop only swaps them in after each step.
//
//===----------------------------------------------------------------------===//

#include "runtime/MetricsServer.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <httplib.h>

#include <algorithm>
#include <mutex>
#include <thread>

using namespace autopar;
using namespace llvm;

void MetricsTotals::add(const std::vector<StepRecord> &Latest) {
  if (Latest.empty())
    return;
  ++Steps;
  for (const StepRecord &R : Latest) {
    for (const auto &[K, V] : R.SentBytes)
      SentBytes[K] += V;
    for (const auto &[K, V] : R.OffloadBytes)
      OffloadBytes[K] += V;
  }
}

std::string autopar::formatPrometheus(const std::vector<StepRecord> &Latest,
                                      const MetricsTotals &Totals) {
  std::string Text;
  raw_string_ostream OS(Text);
  auto Number = [&](double V) { OS << format("%.9g", V); };
  auto Header = [&](StringRef Name, StringRef Type, StringRef Help) {
    OS << "# HELP " << Name << ' ' << Help << "\n# TYPE " << Name << ' ' << Type
       << '\n';
  };
  auto Gauge = [&](StringRef Name, StringRef Help, double V) {
    Header(Name, "gauge", Help);
    OS << Name << ' ';
    Number(V);
    OS << '\n';
  };
  auto Spread = [&](StringRef Name, StringRef Help,
                    double (*Get)(const StepRecord &)) {
    std::vector<double> Vs;
    for (const StepRecord &R : Latest)
      Vs.push_back(Get(R));
    std::sort(Vs.begin(), Vs.end());
    Header(Name, "gauge", Help);
    // The median of an even count is the mean of the middle two.
    size_t N = Vs.size();
    double Median = N % 2 ? Vs[N / 2] : (Vs[N / 2 - 1] + Vs[N / 2]) / 2;
    for (auto [Stat, V] : {std::pair<const char *, double>{"min", Vs.front()},
                           {"median", Median},
                           {"max", Vs.back()}}) {
      OS << Name << "{stat=\"" << Stat << "\"} ";
      Number(V);
      OS << '\n';
    }
  };
  auto Counter = [&](StringRef Name, StringRef Label, StringRef Help,
                     const std::map<std::string, uint64_t> &M) {
    if (M.empty())
      return;
    Header(Name, "counter", Help);
    for (const auto &[K, V] : M)
      OS << Name << '{' << Label << "=\"" << K << "\"} " << V << '\n';
  };
  Gauge("autopar_ranks", "Ranks of the job that reported the latest step.",
        double(Latest.size()));
  Header("autopar_steps_total", "counter", "Steps reported since the start.");
  OS << "autopar_steps_total " << Totals.Steps << '\n';
  if (Latest.empty())
    return Text;
  const StepRecord &First = Latest.front();
  Gauge("autopar_step", "The latest step's number.", double(First.Step));
  Gauge("autopar_loss", "The latest step's loss.", First.Loss);
  Gauge("autopar_learning_rate", "The latest step's learning rate.", First.Lr);
  if (First.GradNorm)
    Gauge("autopar_grad_norm", "The latest step's global gradient norm.",
          *First.GradNorm);
  if (First.LossScale)
    Gauge("autopar_loss_scale", "The latest step's loss scale.",
          *First.LossScale);
  Spread("autopar_step_seconds", "Seconds of the latest step over the ranks.",
         [](const StepRecord &R) { return R.StepSeconds; });
  Spread("autopar_forward_seconds", "Forward seconds of the latest step.",
         [](const StepRecord &R) { return R.ForwardSeconds; });
  Spread("autopar_backward_seconds", "Backward seconds of the latest step.",
         [](const StepRecord &R) { return R.BackwardSeconds; });
  Spread("autopar_communication_seconds",
         "Seconds in collectives and sends in the latest step.",
         [](const StepRecord &R) { return R.CommSeconds; });
  Spread("autopar_optimizer_seconds", "Optimizer seconds of the latest step.",
         [](const StepRecord &R) { return R.OptimizerSeconds; });
  Spread("autopar_idle_seconds",
         "Seconds of the latest step outside compute and communication "
         "(pipeline receives waited for, the time between nodes).",
         [](const StepRecord &R) { return R.IdleSeconds; });
  Spread("autopar_tokens_per_second", "Tokens per second of the latest step.",
         [](const StepRecord &R) { return R.TokensPerSecond; });
  Spread("autopar_device_memory_bytes",
         "Backend memory held at the latest step's peak.",
         [](const StepRecord &R) { return double(R.DeviceBytes); });
  Spread("autopar_host_memory_bytes", "Resident host memory.",
         [](const StepRecord &R) { return double(R.HostBytes); });
  Counter("autopar_sent_bytes_total", "op",
          "Bytes taken in by collectives and sends, summed over the ranks.",
          Totals.SentBytes);
  Counter("autopar_offload_fetched_bytes_total", "tier",
          "Bytes fetched from each offload tier, summed over the ranks.",
          Totals.OffloadBytes);
  OS.flush();
  return Text;
}

struct MetricsServer::Impl {
  httplib::Server Server;
  std::thread Thread;
  int Port = 0;
  std::mutex Mutex;
  std::vector<StepRecord> Latest;
  MetricsTotals Totals;
};

Expected<std::unique_ptr<MetricsServer>> MetricsServer::start(StringRef Host,
                                                              int Port) {
  auto I = std::make_unique<Impl>();
  Impl *Raw = I.get();
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, with which a
  // second job could listen on a port this one holds.
  I->Server.set_socket_options([](int Sock) {
    int Yes = 1;
    ::setsockopt(Sock, SOL_SOCKET, SO_REUSEADDR, &Yes, sizeof(Yes));
  });
  I->Server.Get(
      "/metrics", [Raw](const httplib::Request &, httplib::Response &Res) {
        std::string Body;
        {
          std::lock_guard<std::mutex> Lock(Raw->Mutex);
          Body = formatPrometheus(Raw->Latest, Raw->Totals);
        }
        Res.set_content(Body, "text/plain; version=0.0.4; charset=utf-8");
      });
  std::string H = Host.str();
  int Bound = Port == 0 ? I->Server.bind_to_any_port(H)
                        : (I->Server.bind_to_port(H, Port) ? Port : -1);
  if (Bound <= 0)
    return createStringError(inconvertibleErrorCode(),
                             "--metrics-port " + Twine(Port) +
                                 ": cannot listen on " + Host + ":" +
                                 Twine(Port) +
                                 " (in use?); pick another port, or 0 for "
                                 "any free one");
  I->Port = Bound;
  I->Thread = std::thread([Raw] { Raw->Server.listen_after_bind(); });
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(I)));
}

MetricsServer::MetricsServer(std::unique_ptr<Impl> I) : P(std::move(I)) {}

MetricsServer::~MetricsServer() {
  P->Server.stop();
  if (P->Thread.joinable())
    P->Thread.join();
}

int MetricsServer::getPort() const { return P->Port; }

void MetricsServer::update(std::vector<StepRecord> Latest) {
  std::lock_guard<std::mutex> Lock(P->Mutex);
  P->Totals.add(Latest);
  P->Latest = std::move(Latest);
}
