// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Reporting: the table on stdout and the JSON file.

#include <errno.h>
#include <string.h>

#include "bench/stress/stress.h"

static const char* alloc_name(stress_alloc_mode_t mode) {
  return mode == STRESS_ALLOC_SYNC ? "sync" : "async";
}

// Formats |bytes| as "12.3M" into |buf|.
static const char* human_bytes(uint64_t bytes, char* buf, size_t capacity) {
  static const char* const kUnits[] = {"B", "K", "M", "G", "T"};
  double v = (double)bytes;
  int unit = 0;
  while (v >= 1024 && unit < 4) {
    v /= 1024;
    ++unit;
  }
  snprintf(buf, capacity, unit ? "%.1f%s" : "%.0f%s", v, kUnits[unit]);
  return buf;
}

// The async row of |r|'s workload, or NULL.
static const stress_result_t* async_row(const stress_result_t* results,
                                        size_t count,
                                        const stress_result_t* r) {
  for (size_t i = 0; i < count; ++i) {
    if (results[i].workload == r->workload &&
        !strcmp(results[i].policy, "async") && !results[i].error[0]) {
      return &results[i];
    }
  }
  return NULL;
}

static double ratio(uint64_t a, uint64_t b) {
  return b ? (double)a / (double)b : 0.0;
}

// The replay's notes: the log's live peak, hipline, PyTorch's model and the
// ideal arena against it, and where hipline's slab bytes above the
// requested ones went at its peak.
static void replay_notes(const stress_result_t* r, char* notes,
                         size_t capacity) {
  char live[16], torch[16], arena[16], round[16], tail[16], frag[16], slab[16];
  uint64_t live_bytes = r->log_peak_live_bytes;
  snprintf(
      notes, capacity,
      "log peak live %s; reserved/live %.3f; pytorch model %s (%.3f); "
      "arena %s (%.3f); above live at peak: rounding %s, tails %s, "
      "fragments %s, free slabs %s",
      human_bytes(live_bytes, live, sizeof(live)),
      ratio(r->peak_reserved_bytes, live_bytes),
      human_bytes(r->torch_model_peak_reserved_bytes, torch, sizeof(torch)),
      ratio(r->torch_model_peak_reserved_bytes, live_bytes),
      human_bytes(r->arena_peak_reserved_bytes, arena, sizeof(arena)),
      ratio(r->arena_peak_reserved_bytes, live_bytes),
      human_bytes(r->pool_peak_rounding_bytes, round, sizeof(round)),
      human_bytes(r->pool_peak_tail_bytes, tail, sizeof(tail)),
      human_bytes(r->pool_peak_fragment_bytes, frag, sizeof(frag)),
      human_bytes(r->pool_peak_free_slab_bytes, slab, sizeof(slab)));
}

// The table fits a terminal this wide, unless --wide.
enum { kTableWidth = 100 };

// Prints |text| (the cursor at |column|) wrapped at kTableWidth on spaces;
// continuation lines start at column |indent|. Ends the last line.
static void print_wrapped(FILE* out, size_t column, size_t indent,
                          const char* text) {
  while (*text) {
    size_t room = column < kTableWidth ? kTableWidth - column : 1;
    size_t n = strlen(text);
    if (n > room) {
      size_t cut = room;
      while (cut > 0 && text[cut] != ' ') --cut;
      n = cut ? cut : strcspn(text, " ");  // A word longer than the room.
    }
    fprintf(out, "%.*s\n", (int)n, text);
    text += n;
    while (*text == ' ') ++text;
    if (*text) fprintf(out, "%*s", (int)indent, "");
    column = indent;
  }
}

// The notes of |r|'s row ("" when none).
static void row_notes(const stress_result_t* r, char* notes, size_t capacity) {
  notes[0] = '\0';
  if (r->workload == STRESS_WORKLOAD_MULTISTREAM) {
    snprintf(notes, capacity, "%u queues take %.2fx the time of 1", r->queues,
             r->queue_scaling);
  } else if (r->workload == STRESS_WORKLOAD_REPLAY) {
    replay_notes(r, notes, capacity);
  }
  if (r->partial) snprintf(notes, capacity, "PARTIAL (interrupted)");
  if (r->error[0]) snprintf(notes, capacity, "FAILED (see stderr)");
}

// |r|'s ops/s and peak reserved bytes against its workload's async row
// ("-" when there is none).
static void row_ratios(const stress_result_t* results, size_t count,
                       const stress_result_t* r, char thr[16], char res[16]) {
  const stress_result_t* base = async_row(results, count, r);
  snprintf(thr, 16, "-");
  snprintf(res, 16, "-");
  if (base && base->ops_per_s > 0) {
    snprintf(thr, 16, "%.2fx", r->ops_per_s / base->ops_per_s);
  }
  if (base && base->peak_reserved_bytes > 0) {
    snprintf(
        res, 16, "%.2fx",
        (double)r->peak_reserved_bytes / (double)base->peak_reserved_bytes);
  }
}

static void wide_row(FILE* out, const stress_result_t* r, const char* thr,
                     const char* res, const char* notes) {
  char used[16], reserved[16], nalias[24];
  snprintf(nalias, sizeof(nalias), "%d(%s)", r->assume_no_alias ? 1 : 0,
           !strcmp(r->assume_no_alias_source, "environment") ? "env"
           : !strcmp(r->assume_no_alias_source, "api")       ? "api"
                                                             : "inv");
  fprintf(out,
          "%-11s %-17s %-5s %-12s %-11s %7llu %7.2f %9.0f %8.1f %9.1f %8s "
          "%8s %6llu %6llu %5llu %6llu %5llu %4llu %8s %8s  %s\n",
          stress_workload_name(r->workload), r->policy, alloc_name(r->alloc),
          nalias, hl_fallback_mode_name(r->fallback),
          (unsigned long long)r->ops, r->seconds, r->ops_per_s, r->p50_us,
          r->p99_us, human_bytes(r->peak_used_bytes, used, sizeof(used)),
          human_bytes(r->peak_reserved_bytes, reserved, sizeof(reserved)),
          (unsigned long long)r->async_imports,
          (unsigned long long)r->sync_imports,
          (unsigned long long)r->alias_detected,
          (unsigned long long)r->fallback_releases,
          (unsigned long long)r->verify_failures,
          (unsigned long long)r->use_after_free, thr, res, notes);
}

// The compact row (100 columns), its notes wrapped on the lines under it.
static void compact_row(FILE* out, const stress_result_t* r, const char* thr,
                        const char* res, const char* notes) {
  char reserved[16];
  fprintf(out, "%-11s %-17s %9.0f %8.1f %8s %6llu %6llu %5llu %4llu %8s %8s\n",
          stress_workload_name(r->workload), r->policy, r->ops_per_s, r->p99_us,
          human_bytes(r->peak_reserved_bytes, reserved, sizeof(reserved)),
          (unsigned long long)r->sync_imports,
          (unsigned long long)r->fallback_releases,
          (unsigned long long)r->verify_failures,
          (unsigned long long)r->use_after_free, thr, res);
  if (notes[0]) {
    fprintf(out, "  ");
    print_wrapped(out, 2, 4, notes);
  }
}

void stress_report_table(FILE* out, const stress_result_t* results,
                         size_t count, bool wide) {
  if (count == 0) return;
  fprintf(out, "backend %s, oracle %s (see the legend below the table)\n\n",
          hl_backend_kind_name(results[0].backend), stress_oracle_kind());
  if (wide) {
    fprintf(out,
            "%-11s %-17s %-5s %-12s %-11s %7s %7s %9s %8s %9s %8s %8s %6s %6s "
            "%5s %6s %5s %4s %8s %8s  %s\n",
            "workload", "policy", "alloc", "no_alias", "fallback", "ops",
            "secs", "ops/s", "p50_us", "p99_us", "used", "reserved", "async",
            "sync", "alias", "fb_rel", "vfail", "uaf", "thr/asyn", "res/asyn",
            "notes");
  } else {
    fprintf(out, "%-11s %-17s %9s %8s %8s %6s %6s %5s %4s %8s %8s\n",
            "workload", "policy", "ops/s", "p99_us", "reserved", "sync",
            "fb_rel", "vfail", "uaf", "thr/asyn", "res/asyn");
  }
  for (size_t i = 0; i < count; ++i) {
    const stress_result_t* r = &results[i];
    char notes[320], thr[16], res[16];
    row_notes(r, notes, sizeof(notes));
    row_ratios(results, count, r, thr, res);
    if (wide) {
      wide_row(out, r, thr, res, notes);
    } else {
      compact_row(out, r, thr, res, notes);
    }
  }
  stress_report_legend(out, wide);
}

// The safe path's row of |r|'s workload: assume_no_alias=0 with the
// default (ordered) fallback.
static const stress_result_t* safe_row(const stress_result_t* results,
                                       size_t count, const stress_result_t* r) {
  for (size_t i = 0; i < count; ++i) {
    if (results[i].workload == r->workload &&
        !strcmp(results[i].policy, "noalias0-ordered") &&
        !results[i].error[0]) {
      return &results[i];
    }
  }
  return NULL;
}

void stress_report_verdict(FILE* out, const stress_result_t* results,
                           size_t count) {
  size_t failed = 0, partial = 0;
  uint64_t vfail = 0, uaf = 0;
  for (size_t i = 0; i < count; ++i) {
    failed += results[i].error[0] != '\0';
    partial += results[i].partial;
    vfail += results[i].verify_failures;
    uaf += results[i].use_after_free;
  }
  char cost[512] = "";
  size_t used = 0;
  for (size_t i = 0; i < count && used < sizeof(cost); ++i) {
    const stress_result_t* r = &results[i];
    const stress_result_t* base = async_row(results, count, r);
    if (r != base || !base || base->ops_per_s <= 0) continue;
    const stress_result_t* safe = safe_row(results, count, r);
    if (!safe || base->peak_reserved_bytes == 0) continue;
    int n = snprintf(
        cost + used, sizeof(cost) - used, "%s%s %.2fx ops/s, %.2fx reserved",
        used ? "; " : "", stress_workload_name(r->workload),
        safe->ops_per_s / base->ops_per_s,
        (double)safe->peak_reserved_bytes / (double)base->peak_reserved_bytes);
    if (n > 0) used += (size_t)n;
  }
  fprintf(out, "\nVerdict: ");
  if (cost[0]) {
    fprintf(out,
            "the safe path (assume_no_alias=0, ordered) against async: %s; ",
            cost);
  }
  if (failed || partial || vfail || uaf) {
    fprintf(out,
            "FAILED: %zu run(s) failed, %zu partial, %llu verification "
            "failure(s), %llu use-after-free\n",
            failed, partial, (unsigned long long)vfail,
            (unsigned long long)uaf);
  } else {
    fprintf(out,
            "every run passed (no failure, verification failure or "
            "use-after-free)\n");
  }
}

// Which table a legend entry describes.
typedef enum { LEGEND_BOTH, LEGEND_COMPACT, LEGEND_WIDE } legend_table_t;

void stress_report_legend(FILE* out, bool wide) {
  static const struct {
    legend_table_t table;
    const char* name;
    const char* text;
  } kLegend[] = {
      {LEGEND_BOTH, "workload",
       "random (alloc/free churn on one queue), multistream "
       "(queues in parallel), serving (chains of function "
       "calls), replay (an allocation log)"},
      {LEGEND_BOTH, "policy",
       "async: queue-ordered alloc/free, assume_no_alias=1; "
       "noalias0-*: assume_no_alias=0 with that fallback; sync: "
       "alloc + wait, device sync before each free"},
      {LEGEND_WIDE, "alloc",
       "async (hl_queue_alloca/dealloca) or sync (each waited for)"},
      {LEGEND_WIDE, "no_alias",
       "the assume_no_alias in effect and where it came from: "
       "inv (the per-invocation value), env "
       "(HIPLINE_ASSUME_NO_ALIAS), api"},
      {LEGEND_WIDE, "fallback",
       "how a result that may be aliased is freed: ordered (the "
       "default: in queue order, never early), device-sync (a device "
       "drain first) or frontier (once the queues that used it pass "
       "it); async rows show the device's setting, used only by "
       "detected aliases"},
      {LEGEND_WIDE, "ops, secs, ops/s",
       "operations run, wall time including the final "
       "drain, and their rate"},
      {LEGEND_COMPACT, "ops/s",
       "operations per second of wall time, including the final drain"},
      {LEGEND_WIDE, "p50_us, p99_us",
       "host time of one operation (median, 99th "
       "percentile), microseconds"},
      {LEGEND_COMPACT, "p99_us",
       "host time of one operation, 99th percentile, microseconds"},
      {LEGEND_WIDE, "used", "peak bytes allocated and not yet freed"},
      {LEGEND_BOTH, "reserved", "peak bytes the pool held from the device"},
      {LEGEND_WIDE, "async, sync",
       "function results imported without / with a wait"},
      {LEGEND_COMPACT, "sync",
       "function results imported with a wait (not freed in queue order "
       "as async imports are)"},
      {LEGEND_WIDE, "alias",
       "results detected as aliases of a global or an argument "
       "(always imported with a wait)"},
      {LEGEND_BOTH, "fb_rel", "frees that took the refcount fallback"},
      {LEGEND_BOTH, "vfail",
       "verified words that did not hold their pattern (must be 0)"},
      {LEGEND_BOTH, "uaf", "use-after-free found by --checked (must be 0)"},
      {LEGEND_BOTH, "thr/asyn, res/asyn",
       "ops/s and peak reserved bytes against the "
       "workload's async row (higher thr is better)"},
      {LEGEND_BOTH, "notes",
       "multistream: its queue scaling; replay: the log's peak live bytes; "
       "reserved / live; the peak "
       "reserved of a model of PyTorch's caching allocator on the same "
       "events (bench/stress/torch_model.h) and of an ideal best-fit arena "
       "(bench/stress/arena_model.h), each with its ratio to live; where "
       "the pool's slab bytes above the requested ones were at its peak "
       "(rounding to 256 B, free ends of slabs in use, other free blocks "
       "of slabs in use, slabs with nothing live)"},
      {LEGEND_BOTH, "warnings",
       "serving returns aliases of a global or an argument on purpose "
       "(--aliasing, default 0.10): hipline's stderr warnings that "
       "'stress.first_step' and 'stress.step' returned a global are "
       "expected"},
      {LEGEND_BOTH, "oracle",
       "dispatch: fill/verify kernels on the queues; "
       "host-readback: a build without dispatch"},
      {LEGEND_COMPACT, "--wide",
       "also alloc, no_alias, fallback, ops, secs, p50_us, used, async and "
       "alias; --json FILE writes every counter"},
  };
  fprintf(out, "\nLegend:\n");
  for (size_t i = 0; i < sizeof(kLegend) / sizeof(kLegend[0]); ++i) {
    legend_table_t table = kLegend[i].table;
    if (table != LEGEND_BOTH && (table == LEGEND_WIDE) != wide) continue;
    fprintf(out, "  %-19s ", kLegend[i].name);
    print_wrapped(out, 22, 22, kLegend[i].text);
  }
}

static void json_string(FILE* f, const char* s) {
  fputc('"', f);
  for (; *s; ++s) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') {
      fprintf(f, "\\%c", c);
    } else if (c < 0x20) {
      fprintf(f, "\\u%04x", c);
    } else {
      fputc(c, f);
    }
  }
  fputc('"', f);
}

static void json_result(FILE* f, const stress_result_t* r) {
  fprintf(f, "  {\"workload\": ");
  json_string(f, stress_workload_name(r->workload));
  fprintf(f, ", \"policy\": ");
  json_string(f, r->policy);
  fprintf(f, ", \"backend\": ");
  json_string(f, hl_backend_kind_name(r->backend));
  fprintf(f, ", \"alloc\": \"%s\", \"assume_no_alias\": %d",
          alloc_name(r->alloc), r->assume_no_alias ? 1 : 0);
  fprintf(f, ", \"assume_no_alias_source\": ");
  json_string(f, r->assume_no_alias_source);
  fprintf(f, ", \"fallback\": ");
  json_string(f, hl_fallback_mode_name(r->fallback));
  fprintf(f, ", \"checked\": %s, \"queues\": %u, \"oracle\": \"%s\",\n",
          r->checked ? "true" : "false", r->queues, stress_oracle_kind());
  fprintf(f,
          "   \"ops\": %llu, \"seconds\": %.6f, \"ops_per_s\": %.3f, "
          "\"p50_us\": %.3f, \"p99_us\": %.3f,\n",
          (unsigned long long)r->ops, r->seconds, r->ops_per_s, r->p50_us,
          r->p99_us);
  fprintf(f,
          "   \"peak_used_bytes\": %llu, \"peak_reserved_bytes\": %llu, "
          "\"async_imports\": %llu, \"sync_imports\": %llu, "
          "\"alias_detected\": %llu, \"fallback_releases\": %llu, "
          "\"escaped_roots\": %llu,\n",
          (unsigned long long)r->peak_used_bytes,
          (unsigned long long)r->peak_reserved_bytes,
          (unsigned long long)r->async_imports,
          (unsigned long long)r->sync_imports,
          (unsigned long long)r->alias_detected,
          (unsigned long long)r->fallback_releases,
          (unsigned long long)r->escaped_roots);
  fprintf(
      f,
      "   \"verified\": %llu, \"verify_failures\": %llu, "
      "\"unverified\": %llu, \"use_after_free\": %llu, "
      "\"failed_submissions\": %llu, \"ooms\": %llu",
      (unsigned long long)r->verified, (unsigned long long)r->verify_failures,
      (unsigned long long)r->unverified, (unsigned long long)r->use_after_free,
      (unsigned long long)r->failed_submissions, (unsigned long long)r->ooms);
  if (r->workload == STRESS_WORKLOAD_MULTISTREAM) {
    fprintf(f, ",\n   \"single_queue_seconds\": %.6f, \"queue_scaling\": %.4f",
            r->single_queue_seconds, r->queue_scaling);
  }
  if (r->workload == STRESS_WORKLOAD_REPLAY) {
    fprintf(f,
            ",\n   \"log_events\": %llu, \"peak_live_bytes\": %llu, "
            "\"peak_live_count\": %llu, \"reserved_over_live\": %.4f",
            (unsigned long long)r->log_events,
            (unsigned long long)r->log_peak_live_bytes,
            (unsigned long long)r->log_peak_live_count,
            r->log_peak_live_bytes ? (double)r->peak_reserved_bytes /
                                         (double)r->log_peak_live_bytes
                                   : 0.0);
    fprintf(f,
            ",\n   \"torch_model_peak_reserved_bytes\": %llu, "
            "\"torch_model_reserved_over_live\": %.4f",
            (unsigned long long)r->torch_model_peak_reserved_bytes,
            ratio(r->torch_model_peak_reserved_bytes, r->log_peak_live_bytes));
    fprintf(f,
            ",\n   \"arena_peak_reserved_bytes\": %llu, "
            "\"arena_reserved_over_live\": %.4f, "
            "\"reserved_over_arena\": %.4f, "
            "\"reserved_over_torch_model\": %.4f",
            (unsigned long long)r->arena_peak_reserved_bytes,
            ratio(r->arena_peak_reserved_bytes, r->log_peak_live_bytes),
            ratio(r->peak_reserved_bytes, r->arena_peak_reserved_bytes),
            ratio(r->peak_reserved_bytes, r->torch_model_peak_reserved_bytes));
    fprintf(f,
            ",\n   \"peak_account\": {\"slab_bytes\": %llu, "
            "\"requested_bytes\": %llu, \"rounding_bytes\": %llu, "
            "\"tail_bytes\": %llu, \"fragment_bytes\": %llu, "
            "\"free_slab_bytes\": %llu}",
            (unsigned long long)r->pool_peak_slab_bytes,
            (unsigned long long)r->pool_peak_requested_bytes,
            (unsigned long long)r->pool_peak_rounding_bytes,
            (unsigned long long)r->pool_peak_tail_bytes,
            (unsigned long long)r->pool_peak_fragment_bytes,
            (unsigned long long)r->pool_peak_free_slab_bytes);
  }
  fprintf(f,
          ",\n   \"partial\": %s, \"error\": ", r->partial ? "true" : "false");
  json_string(f, r->error);
  fprintf(f, "}");
}

hl_status_t stress_report_json(const char* path, const stress_result_t* results,
                               size_t count) {
  FILE* f = fopen(path, "w");
  if (!f) {
    return HL_MAKE_STATUS(HL_STATUS_PERMISSION_DENIED,
                          "cannot write the JSON file '%s': %s", path,
                          strerror(errno));
  }
  if (count != 1) fprintf(f, "[\n");
  for (size_t i = 0; i < count; ++i) {
    json_result(f, &results[i]);
    fprintf(f, "%s\n", i + 1 < count ? "," : "");
  }
  if (count != 1) fprintf(f, "]\n");
  int failed = ferror(f);
  int saved = errno;
  if (fclose(f) != 0 && !failed) {
    failed = 1;
    saved = errno;
  }
  if (failed) {
    return HL_MAKE_STATUS(HL_STATUS_DATA_LOSS,
                          "writing the JSON file '%s' failed: %s", path,
                          strerror(saved));
  }
  return hl_ok_status();
}
