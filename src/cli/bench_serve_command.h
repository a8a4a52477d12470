// `quench bench-serve`: the serving benchmark; the work lives in quench/benchmark/.
#pragma once

namespace quench::cli {

int run_bench_serve_command(int argc, char** argv);

}  // namespace quench::cli
