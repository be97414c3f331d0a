/* common/metrics: placeholder until the registry lands (see metrics.h). */
#include "common/metrics.h"

void metrics_counter_add(const char *name, double delta, const char *const *labels) {}
void metrics_gauge_set_l(const char *name, double value, const char *const *labels) {}
void metrics_gauge_add_l(const char *name, double delta, const char *const *labels) {}
void metrics_histogram_observe(const char *name, double value, const char *const *labels) {}
double metrics_value(const char *name, const char *const *labels) { return 0; }
void metrics_render(strbuf *out) {}
int metrics_counters_foreach(metrics_counter_fn fn, void *ud) { return 0; }
int metrics_counter_seed(const char *key, double value) { return 0; }
void metrics_reset(void) {}
