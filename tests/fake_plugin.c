/* fake_plugin.c — one source, several test-only plugins (Vulkan-loader style test drivers). Each .so
 * variant is built with other compile definitions so that test_negotiation reaches every negotiation
 * branch a host can meet in the field: other minors, another major, a wrong entry-point name, an extra
 * export, a broken plugin that answers OK without a table, and a table shorter than its minor promises.
 *
 * Negotiation itself is the library's own code (src/negotiate.c), so these variants test the real
 * negotiation with plugin versions the real library does not have.
 *
 * Definitions (all optional):
 *   FAKE_ABI_MAJOR, FAKE_ABI_MINOR   the plugin's ABI version (default 1.0)
 *   FAKE_ENTRY_NAME                  the exported entry point (default fp8moe_get_api)
 *   FAKE_EXTRA_EXPORT                also export fp8moe_fake_extra_export (the export-set check must fail)
 *   FAKE_NULL_TABLE                  answer OK but hand out no table (a broken plugin)
 *   FAKE_TABLE_SHORTFALL             bytes missing from the table's struct_size (a plugin that forgot
 *                                    the entries of its own minor)
 */
#include <stddef.h>
#include <stdint.h>

#include "fp8moe.h"
#include "negotiate_internal.h"

#ifndef FAKE_ABI_MAJOR
#define FAKE_ABI_MAJOR 1
#endif
#ifndef FAKE_ABI_MINOR
#define FAKE_ABI_MINOR 0
#endif
#ifndef FAKE_ENTRY_NAME
#define FAKE_ENTRY_NAME fp8moe_get_api
#endif
#ifndef FAKE_TABLE_SHORTFALL
#define FAKE_TABLE_SHORTFALL 0
#endif

/* The fake's runtime version: patch 77 tells a test it reached the fake and not the real library. */
#define FAKE_PATCH 77

/* The tests' model of ABI evolution: every minor after 1.0 appends one entry to the table, so the table of
 * minor m is sizeof(fp8moe_api) + m entries. test_negotiation computes the same size on the host side. */
#define FAKE_MAX_APPENDED 3

typedef struct fake_table {
  fp8moe_api api;
  void (*appended[FAKE_MAX_APPENDED])(void);
} fake_table;

_Static_assert(FAKE_ABI_MINOR <= FAKE_MAX_APPENDED, "fake_table has room for minors up to 3");

static void fake_get_version(uint32_t* major, uint32_t* minor, uint32_t* patch) {
  if (major) *major = FAKE_ABI_MAJOR;
  if (minor) *minor = FAKE_ABI_MINOR;
  if (patch) *patch = FAKE_PATCH;
}

static const char* fake_status_string(int32_t status) {
  (void)status;
  return "fake plugin: no backend";
}

/* The fake has no backend: every entry answers BACKEND_UNAVAILABLE, which is what a real plugin says on a
 * machine where nothing can run. The negotiation tests only need the table's header and get_version. */
static int32_t fake_backend_info(fp8moe_backend_info* info) {
  (void)info;
  return FP8MOE_STATUS_BACKEND_UNAVAILABLE;
}
static int32_t fake_context_create(const fp8moe_context_args* args, fp8moe_context** context) {
  (void)args;
  if (context) *context = NULL;
  return FP8MOE_STATUS_BACKEND_UNAVAILABLE;
}
static int32_t fake_context_destroy(fp8moe_context* context) {
  (void)context;
  return FP8MOE_STATUS_OK;
}
static int32_t fake_context_info(const fp8moe_context* context, fp8moe_context_info* info) {
  (void)context;
  (void)info;
  return FP8MOE_STATUS_BACKEND_UNAVAILABLE;
}
static int32_t fake_query_capabilities(const fp8moe_context* context, fp8moe_capabilities* capabilities) {
  (void)context;
  (void)capabilities;
  return FP8MOE_STATUS_BACKEND_UNAVAILABLE;
}
static int32_t fake_query_workspace(const fp8moe_context* context, const fp8moe_moe_args* args, size_t* bytes) {
  (void)context;
  (void)args;
  if (bytes) *bytes = 0;
  return FP8MOE_STATUS_BACKEND_UNAVAILABLE;
}
static int32_t fake_query_support(const fp8moe_context* context, const fp8moe_moe_args* args) {
  (void)context;
  (void)args;
  return FP8MOE_STATUS_BACKEND_UNAVAILABLE;
}
static int32_t fake_run(fp8moe_context* context, const fp8moe_moe_args* args) {
  (void)context;
  (void)args;
  return FP8MOE_STATUS_BACKEND_UNAVAILABLE;
}
static int32_t fake_last_error(const fp8moe_context* context, char* buf, size_t size) {
  (void)context;
  if (buf && size) buf[0] = '\0';
  return FP8MOE_STATUS_OK;
}
static void fake_appended_entry(void) {}

static const fake_table fake_table_instance = {
    {
        sizeof(fp8moe_api) + FAKE_ABI_MINOR * sizeof(void (*)(void)) - FAKE_TABLE_SHORTFALL,
        FAKE_ABI_MAJOR,
        FAKE_ABI_MINOR,
        fake_get_version,
        fake_status_string,
        fake_backend_info,
        fake_context_create,
        fake_context_destroy,
        fake_context_info,
        fake_query_capabilities,
        fake_query_workspace,
        fake_query_support,
        fake_run,
        fake_last_error,
    },
    {fake_appended_entry, fake_appended_entry, fake_appended_entry},
};

FP8MOE_EXPORT int32_t FAKE_ENTRY_NAME(fp8moe_negotiation* negotiation, const fp8moe_api** api);

int32_t FAKE_ENTRY_NAME(fp8moe_negotiation* negotiation, const fp8moe_api** api) {
  const fp8moe_api* table = &fake_table_instance.api;
#ifdef FAKE_NULL_TABLE
  table = NULL; /* the broken plugin: OK without a table */
#endif
  return fp8moe_negotiate_get_api(negotiation, api, table, FAKE_ABI_MAJOR, FAKE_ABI_MINOR);
}

#ifdef FAKE_EXTRA_EXPORT
FP8MOE_EXPORT int32_t fp8moe_fake_extra_export(void);
int32_t fp8moe_fake_extra_export(void) { return FAKE_PATCH; }
#endif
