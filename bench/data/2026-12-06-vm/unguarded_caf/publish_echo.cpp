// CAF 0.17 without kvactor's guard: publishes an echo actor on a free port for 20 s (README.txt).
#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <cstdio>
using namespace caf;
// The unused int: CAF 0.17 binds a null reference when an actor is spawned with no argument.
behavior echo(event_based_actor*, int) {
  return {[](const std::string& s) {
    std::printf("got %s\n", s.c_str());
    std::fflush(stdout);
  }};
}
void caf_main(actor_system& sys) {
  auto a = sys.spawn(echo, 0);
  auto port = sys.middleman().publish(a, 0, "127.0.0.1");
  std::printf("port %d\n", port ? *port : -1);
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::seconds(20));
}
CAF_MAIN(io::middleman)
