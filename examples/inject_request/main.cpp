// inject_request HOST:PORT REQUEST_ID TOKEN...: sends the driver of a live run (`kvactor run
// --inject-port`) one more request, built here as the typed message kvactor::request_spec and
// encoded with kvactor's codec (the MessagePack envelope every recorded message has), and prints
// the driver's reply. The run serves it with its own workload.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include <unistd.h>

#include "deploy/inject_command.hpp"
#include "messages/codec.hpp"
#include "messages/request.hpp"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s HOST:PORT REQUEST_ID TOKEN...\n", argv[0]);
    return 2;
  }
  kvactor::request_spec request;
  request.request_id = std::strtoull(argv[2], nullptr, 10);
  for (int i = 3; i < argc; ++i)
    request.prompt.push_back(std::atoi(argv[i]));
  request.max_output_tokens = 3;

  // kvactor inject reads its message from a file: write the envelope to one.
  const std::string path = "/tmp/inject_request." + std::to_string(getpid()) + ".msgpack";
  const std::vector<char> envelope = kvactor::encode(request);
  std::ofstream(path, std::ios::binary).write(envelope.data(), std::ssize(envelope));

  kvactor::inject_flags flags;
  flags.to = argv[1];
  flags.message = path;
  const int code = kvactor::run_inject(flags, std::cout, std::cerr);
  std::remove(path.c_str());
  return code;
}
