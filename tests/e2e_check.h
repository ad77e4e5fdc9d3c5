/* e2e_check.h — what every end-to-end suite does with a generated problem: run it through the plugin with
 * a workspace of the size query_workspace reports, compare routing and output with ref64 under the
 * docs/TESTING.md tolerances, and count named sub-checks. */
#ifndef FP8MOE_TEST_E2E_CHECK_H
#define FP8MOE_TEST_E2E_CHECK_H

#include "problem_gen.h"

/* query_workspace + a 256-byte aligned buffer + run. Returns run's status (or the query's on failure). */
int32_t pg_run(const test_plugin* tp, fp8moe_context* ctx, pg_problem* p);

/* What comparing one run against the reference found. */
typedef struct pg_result {
  double rel_err;           /* ‖out − ref‖ / ‖ref‖ over elements where the reference is finite */
  double max_weight_rel;    /* routing weights, max relative error */
  int64_t unwritten;        /* output elements still holding the poison bit pattern */
  int64_t nonfinite_bad;    /* non-finite where the reference is finite, or the reverse */
  int64_t ids_bad;          /* routing slots that differ beyond a near-tie */
  int64_t near_ties;        /* tokens whose selection differed only by a near-tie (reference follows) */
  int64_t weights_bad;      /* routing weights beyond relative 1e-6 */
  int32_t ref_failed;       /* the reference could not run (unsupported, out of memory) */
} pg_result;

#define PG_OUTPUT_TOL 2e-2
#define PG_WEIGHT_TOL 1e-6
#define PG_TIE_ULPS 4.0

/* Compares p's (already run) outputs with ref64. ref_out may be NULL; when given it receives the reference
 * output [T*H] the comparison used. Returns 1 when everything is within tolerance. */
int pg_check(pg_problem* p, pg_result* r, double* ref_out);

/* Sub-check bookkeeping shared by the suites: a named sub-check passes when it adds no CHECK failure. */
typedef struct pg_tally {
  int passed, failed;
} pg_tally;
void pg_subcheck_begin(const char* name, int* failures_before);
void pg_subcheck_end(pg_tally* tally, const char* name, int failures_before);
/* Prints "NAME: N passed, M failed" and returns the process exit code. */
int pg_tally_finish(const pg_tally* tally, const char* suite);

#endif /* FP8MOE_TEST_E2E_CHECK_H */
