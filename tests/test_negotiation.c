/* test_negotiation.c — ABI conformance, level 2: negotiation as a host meets it. Loads the real library
 * and the fake plugin variants (tests/fake_plugin.c) with dlopen and checks every branch of
 * fp8moe_get_api: agreement on the minor, every refusal, truncated structs (nothing written past
 * struct_size), NULL pointers, a missing entry point and broken tables. Only the public header is used. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8moe.h"
#include "plugin_host.h"

#define POISON 0xA5

/* ---- the host side: what a real host does with a plugin it did not build ---- */

enum { HOST_OK = 0, HOST_NO_LIBRARY = -1, HOST_NO_ENTRY = -2 };

typedef struct host_plugin {
  void* handle;
  fp8moe_get_api_fn get_api;
  char error[512];
} host_plugin;

static int host_load(const char* path, host_plugin* h) {
  memset(h, 0, sizeof *h);
  h->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h->handle) {
    snprintf(h->error, sizeof h->error, "cannot load %s: %s", path, dlerror());
    return HOST_NO_LIBRARY;
  }
  h->get_api = (fp8moe_get_api_fn)(uintptr_t)dlsym(h->handle, "fp8moe_get_api");
  if (!h->get_api) {
    snprintf(h->error, sizeof h->error, "%s is not an fp8moe plugin: it does not export fp8moe_get_api", path);
    dlclose(h->handle);
    h->handle = NULL;
    return HOST_NO_ENTRY;
  }
  return HOST_OK;
}

static void host_unload(host_plugin* h) {
  if (h->handle) dlclose(h->handle);
  memset(h, 0, sizeof *h);
}

/* Table bytes a host needs for the entries of `minor`: the tests' model of evolution (one entry appended
 * per minor after 1.0; tests/fake_plugin.c builds its tables the same way). */
static size_t host_required_table_size(uint32_t minor) { return sizeof(fp8moe_api) + minor * sizeof(void (*)(void)); }

/* What a careful host checks after an OK negotiation before it calls through the table. */
static int host_table_usable(const fp8moe_api* api, const fp8moe_negotiation* n) {
  if (api == NULL) return 0;
  if (api->struct_size < host_required_table_size(n->agreed_minor)) return 0;
  if (api->abi_major != n->plugin_abi_major || api->abi_minor < n->agreed_minor) return 0;
  return 1;
}

/* A negotiation struct poisoned everywhere, with the host's inputs filled in. */
static void negotiation_init(fp8moe_negotiation* n, size_t struct_size, uint32_t major, uint32_t min_minor,
                             uint32_t max_minor) {
  memset(n, POISON, sizeof *n);
  n->struct_size = struct_size;
  n->host_abi_major = major;
  n->host_min_minor = min_minor;
  n->host_max_minor = max_minor;
}

static int untouched_from(const fp8moe_negotiation* n, size_t from) {
  const unsigned char* b = (const unsigned char*)n;
  for (size_t i = from; i < sizeof *n; ++i)
    if (b[i] != POISON) return 0;
  return 1;
}

/* Bytes [from, sizeof) equal to a copy taken before the call (the host's inputs may lie past a tiny
 * struct_size: they are host bytes the plugin must neither read nor write). */
static int unchanged_from(const fp8moe_negotiation* n, const fp8moe_negotiation* before, size_t from) {
  return from >= sizeof *n || memcmp((const char*)n + from, (const char*)before + from, sizeof *n - from) == 0;
}

static int message_terminated(const fp8moe_negotiation* n) {
  return memchr(n->message, '\0', sizeof n->message) != NULL;
}

/* ---- the matrix ---- */

typedef struct expect_ok {
  uint32_t min_minor, max_minor, agreed;
} expect_ok;

/* Negotiates [min,max] with a plugin of ABI 1.plugin_minor and expects agreement on `agreed`. */
static void check_agrees(const char* what, host_plugin* h, uint32_t plugin_minor, expect_ok e) {
  fp8moe_negotiation n;
  negotiation_init(&n, sizeof n, 1, e.min_minor, e.max_minor);
  const fp8moe_api* api = (const fp8moe_api*)(uintptr_t)0x1;
  int32_t st = h->get_api(&n, &api);
  EXPECT(st == FP8MOE_STATUS_OK, "%s [%u,%u]: status %d (%s)", what, e.min_minor, e.max_minor, st,
         message_terminated(&n) ? n.message : "<unterminated>");
  EXPECT(n.refusal == FP8MOE_REFUSAL_NONE, "%s: refusal %d", what, n.refusal);
  EXPECT(n.agreed_minor == e.agreed, "%s [%u,%u]: agreed %u, expected %u", what, e.min_minor, e.max_minor,
         n.agreed_minor, e.agreed);
  EXPECT(n.plugin_abi_major == 1 && n.plugin_abi_minor == plugin_minor, "%s: plugin says %u.%u, expected 1.%u", what,
         n.plugin_abi_major, n.plugin_abi_minor, plugin_minor);
  EXPECT(message_terminated(&n), "%s: message not NUL-terminated", what);
  EXPECT(api != NULL && api != (const fp8moe_api*)(uintptr_t)0x1, "%s: no table", what);
  if (api && api != (const fp8moe_api*)(uintptr_t)0x1) {
    EXPECT(api->abi_major == 1 && api->abi_minor == plugin_minor, "%s: table says %u.%u", what, api->abi_major,
           api->abi_minor);
    EXPECT(host_table_usable(api, &n), "%s: table of %zu bytes not usable for minor %u", what, api->struct_size,
           n.agreed_minor);
  }
}

/* Negotiates and expects a refusal with `status` and `refusal`, *api set to NULL, a terminated message. */
static void check_refuses(const char* what, host_plugin* h, fp8moe_negotiation* n, int32_t status, int32_t refusal,
                          uint32_t plugin_major, uint32_t plugin_minor) {
  const fp8moe_api* api = (const fp8moe_api*)(uintptr_t)0x1;
  int32_t st = h->get_api(n, &api);
  EXPECT(st == status, "%s: status %d, expected %d", what, st, status);
  EXPECT(api == NULL, "%s: *api not set to NULL on refusal", what);
  EXPECT(n->refusal == refusal, "%s: refusal %d, expected %d", what, n->refusal, refusal);
  EXPECT(message_terminated(n) && n->message[0] != '\0', "%s: no refusal message", what);
  EXPECT(n->plugin_abi_major == plugin_major && n->plugin_abi_minor == plugin_minor,
         "%s: plugin version %u.%u not reported on refusal (expected %u.%u)", what, n->plugin_abi_major,
         n->plugin_abi_minor, plugin_major, plugin_minor);
}

static void check_real_library(const char* path) {
  host_plugin h;
  int rc = host_load(path, &h);
  EXPECT(rc == HOST_OK, "%s", h.error);
  if (rc != HOST_OK) return;
  const uint32_t minor = FP8MOE_ABI_VERSION_MINOR;

  /* same version; a newer-minor host (knows 3, works with 0) against this plugin */
  check_agrees("real same version", &h, minor, (expect_ok){0, minor, minor});
  check_agrees("real newer host", &h, minor, (expect_ok){0, minor + 3, minor});
  check_agrees("real exact range", &h, minor, (expect_ok){minor, minor, minor});

  fp8moe_negotiation n;
  negotiation_init(&n, sizeof n, 1, minor + 1, minor + 3);
  check_refuses("real plugin too old", &h, &n, FP8MOE_STATUS_ABI_MISMATCH, FP8MOE_REFUSAL_PLUGIN_TOO_OLD, 1, minor);
  negotiation_init(&n, sizeof n, 2, 0, 0);
  check_refuses("real host major 2", &h, &n, FP8MOE_STATUS_ABI_MISMATCH, FP8MOE_REFUSAL_MAJOR_MISMATCH, 1, minor);
  negotiation_init(&n, sizeof n, 0, 0, 0);
  check_refuses("real host major 0", &h, &n, FP8MOE_STATUS_ABI_MISMATCH, FP8MOE_REFUSAL_MAJOR_MISMATCH, 1, minor);
  negotiation_init(&n, sizeof n, 1, minor + 2, minor + 1);
  check_refuses("real bad range", &h, &n, FP8MOE_STATUS_ABI_MISMATCH, FP8MOE_REFUSAL_BAD_RANGE, 1, minor);

  /* truncated structs: nothing may be written past struct_size, *api NULL */
  const size_t min_size = offsetof(fp8moe_negotiation, refusal) + sizeof(int32_t);
  const size_t short_sizes[] = {0, sizeof(size_t), offsetof(fp8moe_negotiation, plugin_abi_major),
                                offsetof(fp8moe_negotiation, agreed_minor), offsetof(fp8moe_negotiation, refusal),
                                min_size - 1};
  for (size_t i = 0; i < sizeof short_sizes / sizeof short_sizes[0]; ++i) {
    negotiation_init(&n, short_sizes[i], 1, 0, minor);
    const fp8moe_negotiation before = n;
    const fp8moe_api* api = (const fp8moe_api*)(uintptr_t)0x1;
    int32_t st = h.get_api(&n, &api);
    EXPECT(st == FP8MOE_STATUS_INVALID_ARGUMENT, "struct_size %zu: status %d, expected INVALID_ARGUMENT",
           short_sizes[i], st);
    EXPECT(api == NULL, "struct_size %zu: *api not NULL", short_sizes[i]);
    size_t from = short_sizes[i] < sizeof(size_t) ? sizeof(size_t) : short_sizes[i];
    EXPECT(unchanged_from(&n, &before, from), "struct_size %zu: bytes past struct_size were written",
           short_sizes[i]);
    EXPECT(n.struct_size == short_sizes[i], "struct_size %zu: struct_size overwritten", short_sizes[i]);
  }
  /* the smallest struct that works: fields up to refusal, no room for a message */
  negotiation_init(&n, min_size, 1, 0, minor);
  {
    const fp8moe_api* api = NULL;
    int32_t st = h.get_api(&n, &api);
    EXPECT(st == FP8MOE_STATUS_OK && api != NULL, "struct_size %zu (up to refusal): status %d", min_size, st);
    EXPECT(n.agreed_minor == minor && n.refusal == FP8MOE_REFUSAL_NONE, "struct_size %zu: agreed %u refusal %d",
           min_size, n.agreed_minor, n.refusal);
    EXPECT(untouched_from(&n, min_size), "struct_size %zu: message bytes written past struct_size", min_size);
  }
  /* a refusal into a struct that ends 8 bytes into message: a field is written only when struct_size covers
   * all of it, so the message is not written at all (docs/ABI.md, "The struct_size rule") */
  const size_t msg8 = offsetof(fp8moe_negotiation, message) + 8;
  negotiation_init(&n, msg8, 2, 0, 0);
  {
    const fp8moe_api* api = (const fp8moe_api*)(uintptr_t)0x1;
    int32_t st = h.get_api(&n, &api);
    EXPECT(st == FP8MOE_STATUS_ABI_MISMATCH && api == NULL, "8-byte message: status %d", st);
    EXPECT(n.refusal == FP8MOE_REFUSAL_MAJOR_MISMATCH, "8-byte message: refusal %d", n.refusal);
    EXPECT(untouched_from(&n, offsetof(fp8moe_negotiation, message)),
           "8-byte message: part of the message field was written");
  }
  /* a refusal into a struct that ends right before message */
  const size_t no_msg = offsetof(fp8moe_negotiation, message);
  negotiation_init(&n, no_msg, 2, 0, 0);
  {
    const fp8moe_api* api = NULL;
    int32_t st = h.get_api(&n, &api);
    EXPECT(st == FP8MOE_STATUS_ABI_MISMATCH && n.refusal == FP8MOE_REFUSAL_MAJOR_MISMATCH,
           "no message room: status %d refusal %d", st, n.refusal);
    EXPECT(untouched_from(&n, no_msg), "no message room: message written past struct_size");
  }

  /* NULL pointers */
  {
    const fp8moe_api* api = (const fp8moe_api*)(uintptr_t)0x1;
    int32_t st = h.get_api(NULL, &api);
    EXPECT(st == FP8MOE_STATUS_INVALID_ARGUMENT, "NULL negotiation: status %d", st);
    EXPECT(api == NULL, "NULL negotiation: *api not set to NULL");
    st = h.get_api(NULL, NULL);
    EXPECT(st == FP8MOE_STATUS_INVALID_ARGUMENT, "NULL negotiation and api: status %d", st);
    negotiation_init(&n, sizeof n, 1, 0, minor);
    st = h.get_api(&n, NULL);
    EXPECT(st == FP8MOE_STATUS_INVALID_ARGUMENT, "NULL api: status %d", st);
    EXPECT(n.refusal == FP8MOE_REFUSAL_NULL_ARGUMENT, "NULL api: refusal %d, expected NULL_ARGUMENT", n.refusal);
    EXPECT(message_terminated(&n) && strstr(n.message, "api") != NULL, "NULL api: message does not name api");
  }

  /* the table itself */
  negotiation_init(&n, sizeof n, 1, 0, minor);
  const fp8moe_api* api = NULL;
  int32_t st = h.get_api(&n, &api);
  EXPECT(st == FP8MOE_STATUS_OK && api, "table: status %d", st);
  if (api) {
    EXPECT(api->struct_size >= sizeof(fp8moe_api), "table struct_size %zu < %zu", api->struct_size,
           sizeof(fp8moe_api));
    EXPECT(api->abi_major == FP8MOE_ABI_VERSION_MAJOR && api->abi_minor >= n.agreed_minor, "table ABI %u.%u",
           api->abi_major, api->abi_minor);
    EXPECT(api->abi_major == n.plugin_abi_major && api->abi_minor == n.plugin_abi_minor,
           "table ABI %u.%u differs from negotiated plugin ABI %u.%u", api->abi_major, api->abi_minor,
           n.plugin_abi_major, n.plugin_abi_minor);
    int all_entries = api->get_version && api->status_string && api->backend_info && api->context_create &&
                      api->context_destroy && api->context_info && api->query_capabilities &&
                      api->query_workspace && api->query_support && api->run && api->last_error;
    EXPECT(all_entries, "table: a 1.0 entry is NULL");
    if (api->get_version) {
      uint32_t vmaj = 0, vmin = 0, vpat = 0;
      api->get_version(&vmaj, &vmin, &vpat);
      EXPECT(vmaj == FP8MOE_VERSION_MAJOR, "runtime version %u.%u.%u, header %s", vmaj, vmin, vpat,
             FP8MOE_VERSION_STRING);
      api->get_version(NULL, NULL, NULL); /* documented: any pointer may be NULL */
    }
    if (api->status_string) {
      for (int32_t s = -1; s <= FP8MOE_STATUS_DATA_ERROR + 1; ++s)
        EXPECT(api->status_string(s) != NULL && api->status_string(s)[0] != '\0', "status_string(%d) empty", s);
      EXPECT(api->status_string(12345) != NULL, "status_string(12345) NULL");
    }
  }
  host_unload(&h);
}

static void check_fake_minors(const char* minor0, const char* minor1, const char* minor3) {
  const char* paths[3] = {minor0, minor1, minor3};
  const uint32_t minors[3] = {0, 1, 3};
  for (int i = 0; i < 3; ++i) {
    host_plugin h;
    int rc = host_load(paths[i], &h);
    EXPECT(rc == HOST_OK, "%s", h.error);
    if (rc != HOST_OK) continue;
    const uint32_t pm = minors[i];
    char what[64];
    snprintf(what, sizeof what, "fake 1.%u", pm);
    /* same version */
    check_agrees(what, &h, pm, (expect_ok){0, pm, pm});
    /* older-minor host (knows only 1.0) against this plugin: agreed = host max */
    check_agrees(what, &h, pm, (expect_ok){0, 0, 0});
    /* newer-minor host (knows 3, works with 0): agreed = plugin minor */
    check_agrees(what, &h, pm, (expect_ok){0, 3, pm});
    check_agrees(what, &h, pm, (expect_ok){0, 7, pm});
    if (pm >= 1) check_agrees(what, &h, pm, (expect_ok){1, 1, 1});
    if (pm >= 3) check_agrees(what, &h, pm, (expect_ok){2, 3, 3});

    fp8moe_negotiation n;
    negotiation_init(&n, sizeof n, 1, pm + 1, pm + 2);
    check_refuses(what, &h, &n, FP8MOE_STATUS_ABI_MISMATCH, FP8MOE_REFUSAL_PLUGIN_TOO_OLD, 1, pm);
    negotiation_init(&n, sizeof n, 2, 0, pm);
    check_refuses(what, &h, &n, FP8MOE_STATUS_ABI_MISMATCH, FP8MOE_REFUSAL_MAJOR_MISMATCH, 1, pm);
    /* an empty range is refused even where the plugin lies inside [max, min] */
    negotiation_init(&n, sizeof n, 1, pm + 1, pm > 0 ? pm - 1 : 0);
    check_refuses(what, &h, &n, FP8MOE_STATUS_ABI_MISMATCH, FP8MOE_REFUSAL_BAD_RANGE, 1, pm);

    /* the fake is what answered (patch 77), not the real library */
    negotiation_init(&n, sizeof n, 1, 0, pm);
    const fp8moe_api* api = NULL;
    if (h.get_api(&n, &api) == FP8MOE_STATUS_OK && api) {
      uint32_t a = 0, b = 0, c = 0;
      api->get_version(&a, &b, &c);
      EXPECT(c == 77 && b == pm, "%s: get_version %u.%u.%u is not the fake's", what, a, b, c);
    }
    host_unload(&h);
  }
}

static void check_fake_major2(const char* path) {
  host_plugin h;
  int rc = host_load(path, &h);
  EXPECT(rc == HOST_OK, "%s", h.error);
  if (rc != HOST_OK) return;
  fp8moe_negotiation n;
  negotiation_init(&n, sizeof n, 1, 0, FP8MOE_ABI_VERSION_MINOR);
  check_refuses("fake 2.0 vs host 1", &h, &n, FP8MOE_STATUS_ABI_MISMATCH, FP8MOE_REFUSAL_MAJOR_MISMATCH, 2, 0);
  /* a host that speaks 2 gets it */
  negotiation_init(&n, sizeof n, 2, 0, 0);
  const fp8moe_api* api = NULL;
  int32_t st = h.get_api(&n, &api);
  EXPECT(st == FP8MOE_STATUS_OK && api && api->abi_major == 2, "fake 2.0 vs host 2: status %d", st);
  host_unload(&h);
}

static void check_fake_wrong_symbol(const char* path) {
  host_plugin h;
  int rc = host_load(path, &h);
  EXPECT(rc == HOST_NO_ENTRY, "wrong-symbol plugin: host_load returned %d, expected HOST_NO_ENTRY", rc);
  EXPECT(h.handle == NULL && h.get_api == NULL, "wrong-symbol plugin: host kept a handle");
  EXPECT(strstr(h.error, "fp8moe_get_api") != NULL, "wrong-symbol plugin: host message '%s'", h.error);
  /* the variant really is a loadable library that exports its entry under another name */
  void* raw = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  EXPECT(raw != NULL, "wrong-symbol plugin does not load: %s", dlerror());
  if (raw) {
    EXPECT(dlsym(raw, "fp8moe_get_api_v2") != NULL, "wrong-symbol plugin lacks fp8moe_get_api_v2");
    dlclose(raw);
  }
}

static void check_fake_extra_export(const char* path) {
  host_plugin h;
  int rc = host_load(path, &h);
  EXPECT(rc == HOST_OK, "%s", h.error);
  if (rc != HOST_OK) return;
  /* an extra export does not stop a host; the export-set test is what catches it */
  check_agrees("fake extra export", &h, 0, (expect_ok){0, 0, 0});
  EXPECT(dlsym(h.handle, "fp8moe_fake_extra_export") != NULL, "extra-export variant lacks its extra symbol");
  host_unload(&h);
}

static void check_fake_null_table(const char* path) {
  host_plugin h;
  int rc = host_load(path, &h);
  EXPECT(rc == HOST_OK, "%s", h.error);
  if (rc != HOST_OK) return;
  fp8moe_negotiation n;
  negotiation_init(&n, sizeof n, 1, 0, 0);
  const fp8moe_api* api = (const fp8moe_api*)(uintptr_t)0x1;
  int32_t st = h.get_api(&n, &api);
  EXPECT(st == FP8MOE_STATUS_OK, "null-table plugin: status %d", st);
  EXPECT(api == NULL, "null-table plugin: *api %p", (const void*)api);
  EXPECT(!host_table_usable(api, &n), "host accepted a NULL table");
  host_unload(&h);
}

static void check_fake_short_table(const char* path) {
  host_plugin h;
  int rc = host_load(path, &h);
  EXPECT(rc == HOST_OK, "%s", h.error);
  if (rc != HOST_OK) return;
  /* the plugin claims 1.1 but its table stops at the 1.0 entries */
  fp8moe_negotiation n;
  negotiation_init(&n, sizeof n, 1, 0, 1);
  const fp8moe_api* api = NULL;
  int32_t st = h.get_api(&n, &api);
  EXPECT(st == FP8MOE_STATUS_OK && api && n.agreed_minor == 1, "short table: status %d agreed %u", st,
         n.agreed_minor);
  if (api) {
    EXPECT(api->struct_size < host_required_table_size(1), "short table variant is not short (%zu)",
           api->struct_size);
    EXPECT(!host_table_usable(api, &n), "host did not detect a table of %zu bytes for minor 1", api->struct_size);
  }
  /* a host that only wants 1.0 can still use it */
  negotiation_init(&n, sizeof n, 1, 0, 0);
  api = NULL;
  st = h.get_api(&n, &api);
  EXPECT(st == FP8MOE_STATUS_OK && host_table_usable(api, &n), "short table refused for minor 0");
  host_unload(&h);
}

static void check_missing_library(void) {
  host_plugin h;
  int rc = host_load("/nonexistent/libfp8moe.so.1", &h);
  EXPECT(rc == HOST_NO_LIBRARY && h.error[0] != '\0', "missing library: host_load returned %d", rc);
}

int main(int argc, char** argv) {
  const char* real = argc > 1 ? argv[1] : getenv("FP8MOE_LIBRARY");
  if (!real) {
    fprintf(stderr, "usage: test_negotiation LIBRARY (or set FP8MOE_LIBRARY)\n");
    return 2;
  }
  check_real_library(real);
  check_fake_minors(FAKE_MINOR0_PATH, FAKE_MINOR1_PATH, FAKE_MINOR3_PATH);
  check_fake_major2(FAKE_MAJOR2_PATH);
  check_fake_wrong_symbol(FAKE_WRONG_SYMBOL_PATH);
  check_fake_extra_export(FAKE_EXTRA_EXPORT_PATH);
  check_fake_null_table(FAKE_NULL_TABLE_PATH);
  check_fake_short_table(FAKE_SHORT_TABLE_PATH);
  check_missing_library();
  return test_finish("test_negotiation", test_checks_run);
}
