// The kvactor command: everything happens in kvactor_main so that tests can call it.
#include <iostream>

#include "deploy/cli.hpp"

int main(int argc, char** argv) {
  return kvactor::kvactor_main(argc, argv, std::cout, std::cerr);
}
