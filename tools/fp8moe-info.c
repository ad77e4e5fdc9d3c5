/* fp8moe-info — what the installed fp8moe plugin offers on this machine, in the spirit of vulkaninfo.
 *
 *   fp8moe-info [--summary | --json] [--library PATH]
 *
 * Loads the plugin exactly as a host does (dlopen by PATH, else by SONAME libfp8moe.so.1; in the build tree the
 * SONAME resolves to the build's library through the tool's build RPATH), negotiates the ABI, and prints: where
 * the library was loaded from, its runtime version, the negotiated ABI version, every backend (compiled in,
 * available, device, why not), and the full capability table (routing methods, quantization formats,
 * activations, arguments with their accepted dtypes, limits). --json prints the same facts as one JSON
 * document; --summary prints one screen: library, ABI, each backend with the reason it is unavailable, the
 * backend AUTO picks, and the size of the capability table. Exits 0 on success, 1 when the plugin cannot be
 * loaded or refuses negotiation, 2 on a usage error. */
#define _GNU_SOURCE /* dladdr: report the file the dynamic loader actually picked */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8moe.h"

/* ---- one printer, two renderings: indented text or JSON ---- */

#define MAX_DEPTH 16

typedef struct printer {
  int json;
  int depth;
  int count[MAX_DEPTH]; /* items already written at each depth (JSON commas) */
} printer;

static void json_string(const char* s) {
  putchar('"');
  for (const unsigned char* c = (const unsigned char*)(s ? s : ""); *c; ++c) {
    if (*c == '"' || *c == '\\') printf("\\%c", *c);
    else if (*c == '\n') fputs("\\n", stdout);
    else if (*c == '\t') fputs("\\t", stdout);
    else if (*c < 0x20) printf("\\u%04x", *c);
    else putchar(*c); /* UTF-8 passes through */
  }
  putchar('"');
}

static void indent(const printer* p) {
  for (int i = 0; i < p->depth; ++i) fputs("  ", stdout);
}

/* Starts one item: the JSON comma and key, or the text indentation and label. */
static void item(printer* p, const char* key) {
  if (p->json) {
    if (p->count[p->depth]++) putchar(',');
    putchar('\n');
    indent(p);
    if (key) {
      json_string(key);
      fputs(": ", stdout);
    }
  } else {
    indent(p);
    if (key) printf("%s: ", key);
  }
}

/* text_label: the heading in text mode (default: key). */
static void open_block(printer* p, const char* key, const char* text_label, char bracket) {
  if (p->json) {
    item(p, key);
    putchar(bracket);
  } else {
    indent(p);
    printf("%s:", text_label ? text_label : (key ? key : ""));
  }
  if (!p->json) putchar('\n');
  if (p->depth + 1 < MAX_DEPTH) p->count[++p->depth] = 0;
}

static void close_block(printer* p, char bracket) {
  --p->depth;
  if (p->json) {
    putchar('\n');
    indent(p);
    putchar(bracket);
  }
}

static void obj_open(printer* p, const char* key, const char* text_label) { open_block(p, key, text_label, '{'); }
static void obj_close(printer* p) { close_block(p, '}'); }
static void arr_open(printer* p, const char* key) { open_block(p, key, NULL, '['); }
static void arr_close(printer* p) { close_block(p, ']'); }

static void str(printer* p, const char* key, const char* value) {
  item(p, key);
  if (p->json) json_string(value);
  else printf("%s\n", value ? value : "");
}

static void num(printer* p, const char* key, long long value) {
  item(p, key);
  printf(p->json ? "%lld" : "%lld\n", value);
}

static void boolean(printer* p, const char* key, int value) {
  item(p, key);
  if (p->json) fputs(value ? "true" : "false", stdout);
  else printf("%s\n", value ? "yes" : "no");
}

/* A list of short strings: a JSON array, or one comma-separated text line. */
static void str_list(printer* p, const char* key, const char* const* items, int n) {
  item(p, key);
  if (p->json) {
    putchar('[');
    for (int i = 0; i < n; ++i) {
      if (i) fputs(", ", stdout);
      json_string(items[i]);
    }
    putchar(']');
  } else {
    for (int i = 0; i < n; ++i) printf("%s%s", i ? ", " : "", items[i]);
    printf("%s\n", n ? "" : "(none)");
  }
}

/* ---- names ---- */

typedef struct bit_name {
  uint32_t bit;
  const char* name;
} bit_name;

static const bit_name routing_flag_names[] = {
    {FP8MOE_ROUTING_USES_LOGITS, "USES_LOGITS"},       {FP8MOE_ROUTING_USES_BIAS, "USES_BIAS"},
    {FP8MOE_ROUTING_USES_GROUPS, "USES_GROUPS"},       {FP8MOE_ROUTING_WEIGHT_ON_INPUT, "WEIGHT_ON_INPUT"},
    {FP8MOE_ROUTING_TOP1_ONLY, "TOP1_ONLY"},           {FP8MOE_ROUTING_USES_TOPK_INPUT, "USES_TOPK_INPUT"},
};
static const bit_name argument_flag_names[] = {
    {FP8MOE_ARGUMENT_OUTPUT, "OUTPUT"},
    {FP8MOE_ARGUMENT_ANY_STRIDES, "ANY_STRIDES"},
    {FP8MOE_ARGUMENT_INNER_CONTIGUOUS, "INNER_CONTIGUOUS"},
};
static const bit_name capability_flag_names[] = {
    {FP8MOE_CAPABILITY_GRAPH_CAPTURABLE, "GRAPH_CAPTURABLE"},
    {FP8MOE_CAPABILITY_HOST_SYNC_FREE, "HOST_SYNC_FREE"},
};
static const bit_name backend_mask_names[] = {
    {FP8MOE_BACKEND_MASK_CPU, "cpu"},
    {FP8MOE_BACKEND_MASK_CUDA, "cuda"},
};

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Names of the set bits; unknown bits as hex, so a newer plugin's flags still show. */
static void flag_list(printer* p, const char* key, uint32_t flags, const bit_name* names, int n_names) {
  const char* items[40];
  char unknown[32][12];
  int n = 0, u = 0;
  for (int i = 0; i < n_names; ++i)
    if (flags & names[i].bit) items[n++] = names[i].name;
  for (int b = 0; b < 32; ++b) {
    uint32_t bit = 1u << b;
    int known = 0;
    for (int i = 0; i < n_names; ++i) known |= names[i].bit == bit;
    if ((flags & bit) && !known) {
      snprintf(unknown[u], sizeof unknown[u], "0x%x", (unsigned)bit);
      items[n++] = unknown[u++];
    }
  }
  str_list(p, key, items, n);
}

static void dtype_name(fp8moe_dtype d, char* buf, size_t size) {
  const char* n = NULL;
  if (d.lanes == 1) {
    if (d.code == FP8MOE_DTYPE_FLOAT && d.bits == 32) n = "float32";
    else if (d.code == FP8MOE_DTYPE_FLOAT && d.bits == 16) n = "float16";
    else if (d.code == FP8MOE_DTYPE_FLOAT && d.bits == 64) n = "float64";
    else if (d.code == FP8MOE_DTYPE_BFLOAT && d.bits == 16) n = "bfloat16";
    else if (d.code == FP8MOE_DTYPE_FLOAT8_E4M3FN && d.bits == 8) n = "float8_e4m3fn";
    else if (d.code == FP8MOE_DTYPE_FLOAT8_E5M2 && d.bits == 8) n = "float8_e5m2";
    else if (d.code == FP8MOE_DTYPE_INT) {
      snprintf(buf, size, "int%u", (unsigned)d.bits);
      return;
    } else if (d.code == FP8MOE_DTYPE_UINT) {
      snprintf(buf, size, "uint%u", (unsigned)d.bits);
      return;
    }
  }
  if (n) snprintf(buf, size, "%s", n);
  else snprintf(buf, size, "code %u bits %u lanes %u", (unsigned)d.code, (unsigned)d.bits, (unsigned)d.lanes);
}

static const char* backend_name(int32_t backend) {
  return backend == FP8MOE_BACKEND_CPU ? "cpu" : backend == FP8MOE_BACKEND_CUDA ? "cuda" : "auto";
}

/* ---- loading ---- */

typedef struct loaded {
  void* handle;
  fp8moe_get_api_fn get_api;
  const char* how;
  char path[4096];
} loaded;

static int try_load(const char* name, const char* how, loaded* l, char* err, size_t err_size) {
  void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    size_t used = strlen(err);
    snprintf(err + used, err_size - used, "  %s (%s): %s\n", name, how, dlerror());
    return 0;
  }
  fp8moe_get_api_fn fn = (fp8moe_get_api_fn)(uintptr_t)dlsym(h, "fp8moe_get_api");
  if (!fn) {
    size_t used = strlen(err);
    snprintf(err + used, err_size - used, "  %s (%s): not an fp8moe plugin (no fp8moe_get_api)\n", name, how);
    dlclose(h);
    return 0;
  }
  l->handle = h;
  l->get_api = fn;
  l->how = how;
  Dl_info info;
  if (dladdr((void*)(uintptr_t)fn, &info) && info.dli_fname) {
    char* real = realpath(info.dli_fname, NULL);
    snprintf(l->path, sizeof l->path, "%s", real ? real : info.dli_fname);
    free(real);
  } else {
    snprintf(l->path, sizeof l->path, "%s", name);
  }
  return 1;
}

/* ---- the report ---- */

static void print_backend(printer* p, const fp8moe_api* api, int32_t backend) {
  fp8moe_backend_info bi;
  memset(&bi, 0, sizeof bi);
  bi.struct_size = sizeof bi;
  bi.backend = backend;
  int32_t st = api->backend_info(&bi);
  char label[64];
  snprintf(label, sizeof label, "%s", backend_name(backend));
  obj_open(p, NULL, label);
  str(p, "name", st == FP8MOE_STATUS_OK ? bi.name : backend_name(backend));
  num(p, "backend", backend);
  if (st != FP8MOE_STATUS_OK) {
    str(p, "error", api->status_string(st));
    obj_close(p);
    return;
  }
  boolean(p, "compiled_in", bi.compiled_in);
  boolean(p, "available", bi.available);
  num(p, "device_count", bi.device_count);
  str(p, "device_name", bi.device_name);
  str(p, "reason", bi.reason);
  if (bi.available) {
    /* A context says what AUTO-independent facts only it knows: threads, SMs, graph capture. */
    fp8moe_context_args ca;
    memset(&ca, 0, sizeof ca);
    ca.struct_size = sizeof ca;
    ca.backend = backend;
    char msg[256] = "";
    ca.error_message = msg;
    ca.error_message_size = sizeof msg;
    fp8moe_context* ctx = NULL;
    st = api->context_create(&ca, &ctx);
    if (st == FP8MOE_STATUS_OK) {
      fp8moe_context_info ci;
      memset(&ci, 0, sizeof ci);
      ci.struct_size = sizeof ci;
      fp8moe_capabilities caps;
      memset(&caps, 0, sizeof caps);
      caps.struct_size = sizeof caps;
      obj_open(p, "context", NULL);
      if (api->context_info(ctx, &ci) == FP8MOE_STATUS_OK) {
        str(p, "device_name", ci.device_name);
        num(p, "device_ordinal", ci.device_ordinal);
        num(p, "num_threads", ci.num_threads);
        num(p, "sm_count", ci.sm_count);
        num(p, "compute_capability", ci.compute_capability);
        boolean(p, "graph_capturable", ci.graph_capturable);
      }
      if (api->query_capabilities(ctx, &caps) == FP8MOE_STATUS_OK)
        flag_list(p, "capability_flags", caps.flags, capability_flag_names, COUNT(capability_flag_names));
      obj_close(p);
      api->context_destroy(ctx);
    } else {
      char err[300];
      snprintf(err, sizeof err, "%s: %s", api->status_string(st), msg);
      str(p, "context_error", err);
    }
  }
  obj_close(p);
}

static void print_capabilities(printer* p, const fp8moe_capabilities* c) {
  char label[160];
  obj_open(p, "capabilities", NULL);
  str(p, "backend", backend_name(c->backend));
  flag_list(p, "flags", c->flags, capability_flag_names, COUNT(capability_flag_names));

  arr_open(p, "routing_methods");
  for (uint32_t i = 0; i < c->routing_method_count; ++i) {
    const fp8moe_routing_method_info* m = &c->routing_methods[i];
    snprintf(label, sizeof label, "%s (id %d)", m->name, (int)m->id);
    obj_open(p, NULL, label);
    num(p, "id", m->id);
    str(p, "name", m->name);
    str(p, "summary", m->summary);
    flag_list(p, "flags", m->flags, routing_flag_names, COUNT(routing_flag_names));
    flag_list(p, "backends", m->backends, backend_mask_names, COUNT(backend_mask_names));
    obj_close(p);
  }
  arr_close(p);

  arr_open(p, "quant_formats");
  for (uint32_t i = 0; i < c->quant_format_count; ++i) {
    const fp8moe_quant_format_info* q = &c->quant_formats[i];
    snprintf(label, sizeof label, "%s (id %d)", q->name, (int)q->id);
    obj_open(p, NULL, label);
    num(p, "id", q->id);
    str(p, "name", q->name);
    str(p, "summary", q->summary);
    num(p, "k_multiple", q->k_multiple);
    flag_list(p, "backends", q->backends, backend_mask_names, COUNT(backend_mask_names));
    obj_close(p);
  }
  arr_close(p);

  arr_open(p, "activations");
  for (uint32_t i = 0; i < c->activation_count; ++i) {
    const fp8moe_activation_info* a = &c->activations[i];
    snprintf(label, sizeof label, "%s (id %d)", a->name, (int)a->id);
    obj_open(p, NULL, label);
    num(p, "id", a->id);
    str(p, "name", a->name);
    flag_list(p, "backends", a->backends, backend_mask_names, COUNT(backend_mask_names));
    obj_close(p);
  }
  arr_close(p);

  arr_open(p, "arguments");
  for (uint32_t i = 0; i < c->argument_count; ++i) {
    const fp8moe_argument_info* a = &c->arguments[i];
    char names[16][48];
    const char* items[16];
    int n = 0;
    for (uint32_t d = 0; d < a->dtype_count && n < 16; ++d, ++n) {
      dtype_name(a->dtypes[d], names[n], sizeof names[n]);
      items[n] = names[n];
    }
    snprintf(label, sizeof label, "%s (id %d)", a->name, (int)a->id);
    obj_open(p, NULL, label);
    num(p, "id", a->id);
    str(p, "name", a->name);
    str(p, "shape", a->shape);
    str(p, "when", a->when);
    str_list(p, "dtypes", items, n);
    num(p, "alignment", a->alignment);
    flag_list(p, "flags", a->flags, argument_flag_names, COUNT(argument_flag_names));
    obj_close(p);
  }
  arr_close(p);

  const fp8moe_limits* L = &c->limits;
  obj_open(p, "limits", NULL);
  num(p, "max_tokens", L->max_tokens);
  num(p, "max_hidden", L->max_hidden);
  num(p, "max_intermediate", L->max_intermediate);
  num(p, "max_experts", L->max_experts);
  num(p, "max_top_k", L->max_top_k);
  num(p, "max_groups", L->max_groups);
  num(p, "min_group_size", L->min_group_size);
  num(p, "max_group_size", L->max_group_size);
  obj_close(p);
  obj_close(p);
}

/* One line per backend and the backend AUTO would pick: what a user needs to know before running a layer. */
static void print_summary(const fp8moe_api* api, const loaded* l, const fp8moe_negotiation* n) {
  uint32_t vmaj = 0, vmin = 0, vpat = 0;
  api->get_version(&vmaj, &vmin, &vpat);
  printf("library   fp8moe %u.%u.%u (found by %s)\n          %s\n", vmaj, vmin, vpat, l->how, l->path);
  printf("ABI       %u.%u (this host: %d.%d, agreed minor %u)\n", n->plugin_abi_major, n->plugin_abi_minor,
         FP8MOE_ABI_VERSION_MAJOR, FP8MOE_ABI_VERSION_MINOR, n->agreed_minor);
  const int32_t backends[] = {FP8MOE_BACKEND_CPU, FP8MOE_BACKEND_CUDA};
  for (int i = 0; i < COUNT(backends); ++i) {
    fp8moe_backend_info bi;
    memset(&bi, 0, sizeof bi);
    bi.struct_size = sizeof bi;
    bi.backend = backends[i];
    if (api->backend_info(&bi) != FP8MOE_STATUS_OK) {
      printf("backend   %-4s  unknown to this plugin\n", backend_name(backends[i]));
      continue;
    }
    const char* state = bi.available ? "available" : bi.compiled_in ? "unavailable" : "not compiled in";
    const char* detail = bi.available ? bi.device_name : bi.reason;
    /* one line when it fits 80 columns, else the detail on the next */
    int wide = 18 + (int)strlen(state) + 2 + (int)strlen(detail) > 80;
    printf("backend   %-4s  %s%s%s%s\n", bi.name, state, detail[0] ? ":" : "", wide ? "\n            " : " ",
           detail);
  }
  fp8moe_context_args ca;
  memset(&ca, 0, sizeof ca);
  ca.struct_size = sizeof ca;
  ca.backend = FP8MOE_BACKEND_AUTO;
  char msg[256] = "";
  ca.error_message = msg;
  ca.error_message_size = sizeof msg;
  fp8moe_context* ctx = NULL;
  int32_t st = api->context_create(&ca, &ctx);
  if (st == FP8MOE_STATUS_OK) {
    fp8moe_context_info ci;
    memset(&ci, 0, sizeof ci);
    ci.struct_size = sizeof ci;
    if (api->context_info(ctx, &ci) == FP8MOE_STATUS_OK)
      printf("AUTO      picks %s (%s)\n", backend_name(ci.backend), ci.device_name);
    api->context_destroy(ctx);
  } else {
    printf("AUTO      no context: %s: %s\n", api->status_string(st), msg);
  }
  fp8moe_capabilities caps;
  memset(&caps, 0, sizeof caps);
  caps.struct_size = sizeof caps;
  if (api->query_capabilities(NULL, &caps) == FP8MOE_STATUS_OK)
    printf("contract  %u routing methods, %u quant formats, %u activations, %u arguments\n",
           caps.routing_method_count, caps.quant_format_count, caps.activation_count, caps.argument_count);
}

static int usage(FILE* to, const char* argv0, int code) {
  fprintf(to, "usage: %s [--summary | --json] [--library PATH]\n", argv0);
  return code;
}

int main(int argc, char** argv) {
  int json = 0, summary = 0;
  const char* library = NULL;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--json") == 0) json = 1;
    else if (strcmp(argv[i], "--summary") == 0) summary = 1;
    else if (strcmp(argv[i], "--library") == 0 && i + 1 < argc) library = argv[++i];
    else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return usage(stdout, argv[0], 0);
    else return usage(stderr, argv[0], 2);
  }
  if (json && summary) return usage(stderr, argv[0], 2);

  loaded l;
  memset(&l, 0, sizeof l);
  char err[2048] = "";
  int ok = 0;
  if (library) {
    ok = try_load(library, "--library", &l, err, sizeof err);
  } else {
    char soname[32];
    snprintf(soname, sizeof soname, "libfp8moe.so.%d", FP8MOE_ABI_VERSION_MAJOR);
    ok = try_load(soname, "SONAME", &l, err, sizeof err);
  }
  if (!ok) {
    fprintf(stderr, "fp8moe-info: cannot load the fp8moe plugin:\n%s", err);
    return 1;
  }

  fp8moe_negotiation n;
  memset(&n, 0, sizeof n);
  n.struct_size = sizeof n;
  n.host_abi_major = FP8MOE_ABI_VERSION_MAJOR;
  n.host_min_minor = 0;
  n.host_max_minor = FP8MOE_ABI_VERSION_MINOR;
  const fp8moe_api* api = NULL;
  int32_t st = l.get_api(&n, &api);
  if (st != FP8MOE_STATUS_OK || api == NULL || api->struct_size < sizeof(fp8moe_api)) {
    fprintf(stderr, "fp8moe-info: %s refused ABI %d.[0,%d] (status %d, refusal %d): %s\n", l.path,
            FP8MOE_ABI_VERSION_MAJOR, FP8MOE_ABI_VERSION_MINOR, st, n.refusal,
            api == NULL && st == FP8MOE_STATUS_OK ? "no function table" : n.message);
    dlclose(l.handle);
    return 1;
  }

  if (summary) {
    print_summary(api, &l, &n);
    dlclose(l.handle);
    return 0;
  }

  printer pr;
  memset(&pr, 0, sizeof pr);
  pr.json = json;
  printer* p = &pr;
  if (json) {
    putchar('{');
    pr.depth = 1; /* members of the root object */
  }

  uint32_t vmaj = 0, vmin = 0, vpat = 0;
  api->get_version(&vmaj, &vmin, &vpat);
  char text[128];
  obj_open(p, "library", NULL);
  str(p, "path", l.path);
  str(p, "found_by", l.how);
  snprintf(text, sizeof text, "%u.%u.%u", vmaj, vmin, vpat);
  str(p, "version", text);
  obj_close(p);
  obj_open(p, "abi", NULL);
  num(p, "major", n.plugin_abi_major);
  num(p, "plugin_minor", n.plugin_abi_minor);
  num(p, "agreed_minor", n.agreed_minor);
  snprintf(text, sizeof text, "%s (ABI %d.%d)", FP8MOE_VERSION_STRING, FP8MOE_ABI_VERSION_MAJOR,
           FP8MOE_ABI_VERSION_MINOR);
  str(p, "host_header", text);
  num(p, "table_size", (long long)api->struct_size);
  obj_close(p);

  arr_open(p, "backends");
  print_backend(p, api, FP8MOE_BACKEND_CPU);
  print_backend(p, api, FP8MOE_BACKEND_CUDA);
  arr_close(p);

  fp8moe_capabilities caps;
  memset(&caps, 0, sizeof caps);
  caps.struct_size = sizeof caps;
  st = api->query_capabilities(NULL, &caps);
  int rc = 0;
  if (st == FP8MOE_STATUS_OK) {
    print_capabilities(p, &caps);
  } else {
    str(p, "capabilities_error", api->status_string(st));
    rc = 1;
  }
  if (json) fputs("\n}\n", stdout);
  dlclose(l.handle);
  return rc;
}
