// Must not compile: the metrics take float and double fields only (FieldValue). Built by the
// compile_rejects_integer_fields test, which passes when this fails to compile.
#include <vector>

#include "gridshard/metrics/metrics.hpp"

int main() {
    std::vector<int> values(4);
    const gridshard::ShardedGrid* grid = nullptr;
    const std::vector<double> weights(2);
    (void)gridshard::rmse<int>(*grid, {values, 1}, {values, 1}, {weights, false});
}
