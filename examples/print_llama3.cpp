// Example program: builds the Llama-3-8B decoder layer with the C++ API and prints its text IR.
#include <cstdio>

#include "layerjit/llama.h"
#include "layerjit/text.h"

int main() {
  lj::Module m;
  m.graphs.push_back(lj::llama_prefill(lj::LlamaConfig::llama3_8b()));
  m.graphs.push_back(lj::llama_decode(lj::LlamaConfig::llama3_8b()));
  std::fputs(lj::print_module(m).c_str(), stdout);
  return 0;
}
