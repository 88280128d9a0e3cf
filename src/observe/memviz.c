/* The memory-snapshot viewer: a snapshot as one self-contained HTML page
 * (ct_memory_viz in ctorch/memory.h, `ctorch memviz`).
 *
 * Reads what ct_memory_snapshot writes (pickle or JSON) and also what PyTorch's
 * torch.cuda.memory._dump_snapshot writes, since both are the same plain-data pickle.
 * The page has no external resources: the snapshot is embedded as JSON and drawn by a
 * small inline script (memory over time by op from the trace, and the segment map).
 * See docs/memory.md. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "ctorch/memory.h"
#include "ctorch/io.h"

#define OP "memviz"

/* ------------------------------------------------------------------ page */

/* The page: head and styles, then (written by ct_cmd_memviz) the snapshot as JSON, then
 * the script that draws it. */
static const char page_head[] =
    "<!DOCTYPE html>\n"
    "<html lang=\"en\"><head><meta charset=\"utf-8\"><title>ctorch memory snapshot</title>\n"
    "<style>\n"
    "body{font:14px/1.4 -apple-system,\"Segoe UI\",Helvetica,Arial,sans-serif;margin:20px 28px;color:#222;background:#fff}\n"
    "h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:22px 0 6px}\n"
    ".note{color:#666;font-size:12px}#error{color:#b00;font-weight:bold}\n"
    "table{border-collapse:collapse;font-size:13px}th{text-align:left;padding:1px 14px 1px 0;color:#555;font-weight:normal}td{font-family:monospace}\n"
    ".key{display:inline-block;margin:2px 14px 2px 0;font-size:12px}.key i{display:inline-block;width:11px;height:11px;margin-right:5px;vertical-align:-1px;border:1px solid #999}\n"
    ".seg{display:flex;align-items:center;margin:3px 0}.label{width:300px;flex:none;font-family:monospace;font-size:12px}.sub{color:#777}\n"
    ".barwrap{flex:1}.bar{display:flex;height:22px;border:1px solid #555;background:#fff}\n"
    ".blk{flex-basis:0;min-width:1px;border-right:1px solid #fff;box-sizing:border-box}\n"
    ".blk.inactive{background:#e4e4e4}.blk.active_pending_free{background:repeating-linear-gradient(45deg,#d62728 0 4px,#f4a3a3 4px 8px)}\n"
    "</style></head><body>\n"
    "<h1>ctorch memory snapshot</h1><div class=\"note\" id=\"source\"></div><div id=\"error\"></div>\n"
    "<h2>Summary</h2><table id=\"summary\"></table>\n"
    "<h2>Memory over time, by the op that allocated it</h2><div id=\"chart\"></div><div id=\"legend\"></div><div class=\"note\" id=\"chart-note\"></div>\n"
    "<h2>Segment map</h2>\n"
    "<div class=\"note\">One row per segment (sorted by address, width relative to the largest); blocks colored by the op that allocated them.\n"
    "<span class=\"key\"><i style=\"background:#e4e4e4\"></i>inactive (cached, free)</span><span class=\"key\"><i style=\"background:#d62728\"></i>active, pending free (stream use)</span></div>\n"
    "<div id=\"segments\"></div>\n";

static const char page_script[] =
    "\"use strict\";\n"
    "(function () {\n"
    "  var PALETTE = [\"#4e79a7\", \"#f28e2c\", \"#59a14f\", \"#e15759\", \"#76b7b2\", \"#edc949\", \"#af7aa1\", \"#ff9da7\", \"#9c755f\", \"#2f4b7c\"];\n"
    "  var OTHER = \"#bab0ab\", CACHED = \"#e4e4e4\", PENDING = \"#d62728\";\n"
    "  var $ = function (id) { return document.getElementById(id); };\n"
    "  function fmt(n) {\n"
    "    var u = [\"B\", \"KiB\", \"MiB\", \"GiB\", \"TiB\"], i = 0, a = Math.abs(n);\n"
    "    while (a >= 1024 && i < u.length - 1) { a /= 1024; n /= 1024; i++; }\n"
    "    return (i === 0 ? n.toFixed(0) : n.toFixed(a >= 100 ? 0 : a >= 10 ? 1 : 2)) + \" \" + u[i];\n"
    "  }\n"
    "  function hex(n) { return \"0x\" + Number(n).toString(16); }\n"
    "  function el(tag, attrs, text) {\n"
    "    var ns = /^(svg|rect|line|text|polygon|g|title|path)$/.test(tag) ? \"http://www.w3.org/2000/svg\" : null;\n"
    "    var e = ns ? document.createElementNS(ns, tag) : document.createElement(tag);\n"
    "    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);\n"
    "    if (text !== undefined) e.textContent = text;\n"
    "    return e;\n"
    "  }\n"
    "  function opOf(frames) {\n"
    "    return frames && frames.length ? String(frames[frames.length - 1].name) : \"(outside any op)\";\n"
    "  }\n"
    "  var snap;\n"
    "  try { snap = JSON.parse($(\"snapshot-data\").textContent); } catch (e) {\n"
    "    $(\"error\").textContent = \"Could not read the snapshot: \" + e; return;\n"
    "  }\n"
    "  var segs = (snap.segments || []).slice().sort(function (a, b) { return a.address - b.address; });\n"
    "  var traces = snap.device_traces || [];\n"
    "  var device = 0;\n"
    "  for (var d = 0; d < traces.length; d++) if (traces[d].length) { device = d; break; }\n"
    "  if (!traces.length && segs.length) device = segs[0].device;\n"
    "  segs = segs.filter(function (s) { return s.device === device; });\n"
    "  var trace = traces[device] || [];\n"
    "\n"
    "  // ---- summary\n"
    "  var reserved = 0, allocated = 0, pending = 0, inactive = 0, req = 0, nblocks = 0;\n"
    "  segs.forEach(function (s) {\n"
    "    reserved += s.total_size;\n"
    "    s.blocks.forEach(function (b) {\n"
    "      nblocks++;\n"
    "      if (b.state === \"active_allocated\") { allocated += b.size; req += b.requested_size; }\n"
    "      else if (b.state === \"active_pending_free\") pending += b.size;\n"
    "      else inactive += b.size;\n"
    "    });\n"
    "  });\n"
    "  var nooms = trace.filter(function (t) { return t.action === \"oom\"; }).length;\n"
    "  var rows = [[\"device\", String(device)], [\"segments\", segs.length + \" (\" + nblocks + \" blocks)\"],\n"
    "    [\"reserved\", fmt(reserved)], [\"allocated\", fmt(allocated) + \" (requested \" + fmt(req) + \")\"],\n"
    "    [\"pending free\", fmt(pending)], [\"inactive (cached)\", fmt(inactive)],\n"
    "    [\"trace entries\", trace.length + (nooms ? \", \" + nooms + \" out of memory\" : \"\")]];\n"
    "  var settings = snap.allocator_settings || {};\n"
    "  Object.keys(settings).forEach(function (k) { rows.push([k, String(settings[k])]); });\n"
    "  var tbl = $(\"summary\");\n"
    "  rows.forEach(function (r) {\n"
    "    var tr = el(\"tr\"); tr.appendChild(el(\"th\", {}, r[0])); tr.appendChild(el(\"td\", {}, r[1])); tbl.appendChild(tr);\n"
    "  });\n"
    "\n"
    "  // ---- categories: the op that allocated each block\n"
    "  var catBytes = {};\n"
    "  segs.forEach(function (s) { s.blocks.forEach(function (b) {\n"
    "    if (b.state !== \"inactive\") catBytes[opOf(b.frames)] = (catBytes[opOf(b.frames)] || 0) + b.requested_size;\n"
    "  }); });\n"
    "  // Replay the trace backwards from the final state, so that history that starts\n"
    "  // mid-run (or wrapped around its ring) still gives absolute numbers.\n"
    "  var events = trace.filter(function (t) {\n"
    "    return t.action === \"alloc\" || t.action === \"free_completed\" || t.action === \"segment_alloc\" ||\n"
    "      t.action === \"segment_free\" || t.action === \"oom\";\n"
    "  });\n"
    "  var allocCat = {}, freeCat = [];\n"
    "  events.forEach(function (t, i) {\n"
    "    if (t.action === \"alloc\") allocCat[t.addr] = opOf(t.frames);\n"
    "    if (t.action === \"free_completed\") { freeCat[i] = t.addr in allocCat ? allocCat[t.addr] : \"(before trace)\"; delete allocCat[t.addr]; }\n"
    "  });\n"
    "  var cur = {}, curRes = reserved;\n"
    "  Object.keys(catBytes).forEach(function (k) { cur[k] = catBytes[k]; });\n"
    "  var series = new Array(events.length + 1);\n"
    "  series[events.length] = { cats: Object.assign({}, cur), reserved: curRes };\n"
    "  var peak = {};\n"
    "  function notePeak() { for (var k in cur) peak[k] = Math.max(peak[k] || 0, cur[k]); }\n"
    "  notePeak();\n"
    "  for (var i = events.length - 1; i >= 0; i--) {\n"
    "    var t = events[i];\n"
    "    if (t.action === \"alloc\") { var c = opOf(t.frames); cur[c] = (cur[c] || 0) - t.size; }\n"
    "    else if (t.action === \"free_completed\") { cur[freeCat[i]] = (cur[freeCat[i]] || 0) + t.size; }\n"
    "    else if (t.action === \"segment_alloc\") curRes -= t.size;\n"
    "    else if (t.action === \"segment_free\") curRes += t.size;\n"
    "    for (var k in cur) if (cur[k] < 0) cur[k] = 0;\n"
    "    notePeak();\n"
    "    series[i] = { cats: Object.assign({}, cur), reserved: curRes };\n"
    "  }\n"
    "  // The largest categories get their own color; they stack in order of first appearance.\n"
    "  var first = {};\n"
    "  series.forEach(function (s, i) { for (var k in s.cats) if (s.cats[k] > 0 && !(k in first)) first[k] = i; });\n"
    "  var cats = Object.keys(peak).filter(function (k) { return peak[k] > 0; }).sort(function (a, b) { return peak[b] - peak[a]; });\n"
    "  var shown = cats.slice(0, PALETTE.length - 1), color = {};\n"
    "  shown.sort(function (a, b) { return first[a] - first[b]; });\n"
    "  shown.forEach(function (c, i) { color[c] = PALETTE[i]; });\n"
    "  var hasOther = cats.length > shown.length;\n"
    "\n"
    "  // ---- chart\n"
    "  var W = 1100, H = 360, L = 80, B = 34, T = 10;\n"
    "  var svg = el(\"svg\", { width: W, height: H + B + T, viewBox: \"0 0 \" + W + \" \" + (H + B + T) });\n"
    "  var n = series.length, maxY = 1;\n"
    "  series.forEach(function (s) {\n"
    "    var tot = 0; for (var k in s.cats) tot += s.cats[k];\n"
    "    maxY = Math.max(maxY, tot, s.reserved);\n"
    "  });\n"
    "  function X(i) { return L + (n > 1 ? (i / (n - 1)) * (W - L - 10) : (W - L - 10) / 2); }\n"
    "  function Y(v) { return T + H - (v / maxY) * H; }\n"
    "  for (var g = 0; g <= 4; g++) {\n"
    "    var v = maxY * g / 4;\n"
    "    svg.appendChild(el(\"line\", { x1: L, x2: W - 10, y1: Y(v), y2: Y(v), stroke: \"#ddd\" }));\n"
    "    svg.appendChild(el(\"text\", { x: L - 6, y: Y(v) + 4, \"text-anchor\": \"end\", \"font-size\": 11 }, fmt(v)));\n"
    "  }\n"
    "  var layers = shown.slice(); if (hasOther) layers.push(\"(other ops)\");\n"
    "  function layerVal(s, name) {\n"
    "    if (name !== \"(other ops)\") return s.cats[name] || 0;\n"
    "    var v = 0; for (var k in s.cats) if (!(k in color)) v += s.cats[k]; return v;\n"
    "  }\n"
    "  var base = series.map(function () { return 0; });\n"
    "  function band(top, bottom, fill, label) {\n"
    "    var pts = [];\n"
    "    for (var i = 0; i < n; i++) pts.push(X(i) + \",\" + Y(top[i]));\n"
    "    for (var j = n - 1; j >= 0; j--) pts.push(X(j) + \",\" + Y(bottom[j]));\n"
    "    if (n === 1) { pts = [X(0) - 20 + \",\" + Y(top[0]), X(0) + 20 + \",\" + Y(top[0]), X(0) + 20 + \",\" + Y(bottom[0]), X(0) - 20 + \",\" + Y(bottom[0])]; }\n"
    "    var p = el(\"polygon\", { points: pts.join(\" \"), fill: fill, stroke: \"none\" });\n"
    "    p.appendChild(el(\"title\", {}, label));\n"
    "    svg.appendChild(p);\n"
    "  }\n"
    "  layers.forEach(function (name) {\n"
    "    var top = series.map(function (s, i) { return base[i] + layerVal(s, name); });\n"
    "    band(top, base, color[name] || OTHER, name + \" (peak \" + fmt(peak[name] || 0) + \")\");\n"
    "    base = top;\n"
    "  });\n"
    "  var resTop = series.map(function (s, i) { return Math.max(s.reserved, base[i]); });\n"
    "  band(resTop, base, CACHED, \"reserved but not allocated\");\n"
    "  events.forEach(function (t, i) {\n"
    "    if (t.action === \"oom\") svg.appendChild(el(\"line\", { x1: X(i), x2: X(i), y1: T, y2: T + H, stroke: PENDING, \"stroke-width\": 2 }));\n"
    "  });\n"
    "  svg.appendChild(el(\"line\", { x1: L, x2: L, y1: T, y2: T + H, stroke: \"#333\" }));\n"
    "  svg.appendChild(el(\"line\", { x1: L, x2: W - 10, y1: T + H, y2: T + H, stroke: \"#333\" }));\n"
    "  svg.appendChild(el(\"text\", { x: (L + W) / 2, y: T + H + 28, \"text-anchor\": \"middle\", \"font-size\": 12 },\n"
    "    events.length + \" allocator events (alloc, free, segment alloc/free), oldest to newest\" + (nooms ? \"; red lines: out of memory\" : \"\")));\n"
    "  if (events.length > 1) {\n"
    "    var ms = (events[events.length - 1].time_us - events[0].time_us) / 1000;\n"
    "    svg.appendChild(el(\"text\", { x: L, y: T + H + 14, \"font-size\": 11 }, \"0 ms\"));\n"
    "    svg.appendChild(el(\"text\", { x: W - 10, y: T + H + 14, \"font-size\": 11, \"text-anchor\": \"end\" }, \"+\" + ms.toFixed(ms < 10 ? 2 : 0) + \" ms\"));\n"
    "  }\n"
    "  $(\"chart\").appendChild(svg);\n"
    "  if (!trace.length) $(\"chart-note\").textContent = \"No trace was recorded: call ct_memory_record_history(true, N) before the work to see memory over time. The chart shows the state at the snapshot.\";\n"
    "  var leg = $(\"legend\");\n"
    "  function legend(c, label) {\n"
    "    var s = el(\"span\", { class: \"key\" }); var sw = el(\"i\"); sw.style.background = c; s.appendChild(sw);\n"
    "    s.appendChild(document.createTextNode(label)); leg.appendChild(s);\n"
    "  }\n"
    "  layers.forEach(function (name) { legend(color[name] || OTHER, name + \" (peak \" + fmt(peak[name] || 0) + \")\"); });\n"
    "  legend(CACHED, \"reserved, not allocated (cache and rounding)\");\n"
    "\n"
    "  // ---- segment map\n"
    "  var maxSeg = 1; segs.forEach(function (s) { maxSeg = Math.max(maxSeg, s.total_size); });\n"
    "  var map = $(\"segments\");\n"
    "  segs.forEach(function (s) {\n"
    "    var row = el(\"div\", { class: \"seg\" });\n"
    "    var lab = el(\"div\", { class: \"label\" });\n"
    "    lab.textContent = hex(s.address) + \"  \" + fmt(s.total_size) + \"  \" + s.segment_type + \"  stream \" + s.stream;\n"
    "    var sub = el(\"div\", { class: \"sub\" }, \"allocated \" + fmt(s.allocated_size) + \", \" + s.blocks.length + \" block\" + (s.blocks.length === 1 ? \"\" : \"s\"));\n"
    "    lab.appendChild(sub);\n"
    "    row.appendChild(lab);\n"
    "    var bar = el(\"div\", { class: \"bar\" });\n"
    "    bar.style.width = Math.max(4, 100 * s.total_size / maxSeg) + \"%\";\n"
    "    s.blocks.forEach(function (b) {\n"
    "      var blk = el(\"div\", { class: \"blk \" + b.state });\n"
    "      blk.style.flexGrow = String(b.size);\n"
    "      if (b.state === \"active_allocated\") blk.style.background = color[opOf(b.frames)] || OTHER;\n"
    "      blk.title = hex(b.address) + \"\\n\" + fmt(b.size) + (b.state !== \"inactive\" ? \" (requested \" + fmt(b.requested_size) + \")\" : \"\") +\n"
    "        \"\\n\" + b.state + (b.state !== \"inactive\" ? \"\\nop: \" + opOf(b.frames) : \"\");\n"
    "      bar.appendChild(blk);\n"
    "    });\n"
    "    var wrap = el(\"div\", { class: \"barwrap\" }); wrap.appendChild(bar);\n"
    "    row.appendChild(wrap);\n"
    "    map.appendChild(row);\n"
    "  });\n"
    "  if (!segs.length) map.textContent = \"No segments: the allocator held no memory at the snapshot.\";\n"
    "})();\n";

/* ------------------------------------------------------------------ output */

typedef struct {
    FILE *f;
    size_t written;
    bool too_big;
} page_out;

#define CT_MEMVIZ_MAX_OUTPUT ((size_t)1 << 30)

static void put(page_out *o, const char *s, size_t n) {
    if (o->too_big)
        return;
    if (o->written + n > CT_MEMVIZ_MAX_OUTPUT) {
        o->too_big = true; /* shared memo references could otherwise blow up */
        return;
    }
    fwrite(s, 1, n, o->f);
    o->written += n;
}
static void puts_(page_out *o, const char *s) { put(o, s, strlen(s)); }

/* JSON string; '<', '>' and '&' escaped so the text is safe inside <script>. */
static void json_str(page_out *o, const char *s, size_t n) {
    put(o, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            put(o, esc, 2);
        } else if (c < 0x20 || c == '<' || c == '>' || c == '&') {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            put(o, esc, 6);
        } else {
            put(o, (const char *)&c, 1);
        }
    }
    put(o, "\"", 1);
}

/* The snapshot as JSON: tuples as arrays, int keys as strings, NaN and infinities as
 * null. Nesting is capped at 64 levels (the reader caps it at CT_VALUE_MAX_DEPTH). */
static ct_status json_value(page_out *o, const ct_value *v, int depth, const char *in) {
    if (o->too_big)
        return CT_OK;
    char buf[64];
    if (depth > 64)
        return ct_error(CT_ERROR_FORMAT, OP, "%s: the snapshot nests deeper than 64 levels", in);
    size_t len = 0;
    const char *str;
    switch (ct_value_kind(v)) {
    case CT_VALUE_NONE: puts_(o, "null"); break;
    case CT_VALUE_BOOL: puts_(o, ct_value_bool(v) ? "true" : "false"); break;
    case CT_VALUE_INT:
        snprintf(buf, sizeof buf, "%lld", (long long)ct_value_int(v));
        puts_(o, buf);
        break;
    case CT_VALUE_FLOAT: {
        double f = ct_value_float(v);
        if (f != f || f > 1.7976931348623157e308 || f < -1.7976931348623157e308)
            puts_(o, "null");
        else {
            snprintf(buf, sizeof buf, "%.17g", f);
            puts_(o, buf);
        }
        break;
    }
    case CT_VALUE_STRING:
        str = ct_value_str(v, &len);
        json_str(o, str, len);
        break;
    case CT_VALUE_LIST:
    case CT_VALUE_TUPLE:
        put(o, "[", 1);
        for (int64_t i = 0; i < ct_value_len(v); i++) {
            if (i)
                put(o, ",", 1);
            if (json_value(o, ct_value_at(v, i), depth + 1, in))
                return ct_last_status();
        }
        put(o, "]", 1);
        break;
    case CT_VALUE_DICT:
        put(o, "{", 1);
        for (int64_t i = 0; i < ct_value_len(v); i++) {
            const ct_value *k = ct_value_key_at(v, i);
            if (i)
                put(o, ",", 1);
            if (ct_value_kind(k) == CT_VALUE_STRING) {
                str = ct_value_str(k, &len);
                json_str(o, str, len);
            } else {
                snprintf(buf, sizeof buf, "\"%lld\"", (long long)ct_value_int(k));
                puts_(o, buf);
            }
            put(o, ":", 1);
            if (json_value(o, ct_value_at(v, i), depth + 1, in))
                return ct_last_status();
        }
        put(o, "}", 1);
        break;
    default:
        return ct_error(CT_ERROR_FORMAT, OP, "%s: the snapshot holds a %s, which is not plain data", in,
                        ct_value_type_name(ct_value_kind(v)));
    }
    return CT_OK;
}

static unsigned char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        ct_error(CT_ERROR_IO, OP, "cannot read '%s': %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = ct_xmalloc(OP, cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap)
            break;
        unsigned char *b = cap > SIZE_MAX / 2 ? NULL : ct_xrealloc(OP, buf, cap * 2);
        if (!b) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = b;
        cap *= 2;
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        ct_error(CT_ERROR_IO, OP, "cannot read '%s'", path);
        return NULL;
    }
    *len = n;
    return buf;
}

ct_status ct_memory_viz(const char *snapshot_path, const char *html_path) {
    const char *in = snapshot_path, *outpath = html_path;
    if (!in || !outpath)
        return ct_error(CT_ERROR_NULL_ARGUMENT, OP, "%s is NULL", in ? "html_path" : "snapshot_path");
    size_t n = 0;
    unsigned char *data = read_all(in, &n);
    ct_status st = CT_ERROR_IO;
    ct_value *doc = NULL;
    FILE *f = NULL;
    if (!data) {
        st = ct_last_status();
        goto out;
    }
    size_t start = 0;
    while (start < n && (data[start] == ' ' || data[start] == '\n' || data[start] == '\r' || data[start] == '\t'))
        start++;
    bool is_json = start < n && data[start] == '{';
    if (!is_json) {
        if (n == 0 || data[0] != 0x80) {
            st = ct_error(CT_ERROR_FORMAT, OP, "'%s' is neither a pickle (protocol 2 or later) nor JSON", in);
            goto out;
        }
        /* plain data only: no hooks, so no persistent ids */
        if (!(doc = ct_value_from_pickle(data, n, NULL, in))) {
            /* "value_from_pickle: <in> offset N: ..." from the reader, under this
             * function's name */
            static const char prefix[] = "value_from_pickle: ";
            const char *e = ct_last_error();
            char msg[640];
            snprintf(msg, sizeof msg, "%s", strncmp(e, prefix, sizeof prefix - 1) ? e : e + sizeof prefix - 1);
            st = ct_error(ct_last_status(), OP, "%s", msg);
            goto out;
        }
        if (ct_value_kind(doc) == CT_VALUE_LIST) {
            /* PyTorch 1.13's _snapshot() was the segment list alone: wrap it. */
            ct_value *d = ct_value_new_dict();
            if (!d || ct_value_set(d, "segments", doc)) {
                ct_value_free(d);
                doc = NULL; /* ct_value_set took it, even on failure */
                st = ct_last_status();
                goto out;
            }
            doc = d;
        }
        if (ct_value_kind(doc) != CT_VALUE_DICT) {
            st = ct_error(CT_ERROR_FORMAT, OP, "'%s' does not hold a memory snapshot (a dict with \"segments\")", in);
            goto out;
        }
    }
    f = fopen(outpath, "wb");
    if (!f) {
        st = ct_error(CT_ERROR_IO, OP, "cannot open '%s' for writing: %s", outpath, strerror(errno));
        goto out;
    }
    page_out o = {f, 0, false};
    puts_(&o, page_head);
    puts_(&o, "<script>document.getElementById('source').textContent=");
    json_str(&o, in, strlen(in));
    puts_(&o, ";</script>\n<script type=\"application/json\" id=\"snapshot-data\">");
    if (is_json) {
        /* '<' can only occur inside JSON strings, where \u003c means the same */
        for (size_t i = start; i < n; i++)
            if (data[i] == '<')
                puts_(&o, "\\u003c");
            else
                put(&o, (const char *)data + i, 1);
    } else {
        if (json_value(&o, doc, 0, in) != CT_OK && !o.too_big) {
            st = ct_last_status();
            goto out;
        }
    }
    puts_(&o, "</script>\n<script>\n");
    puts_(&o, page_script);
    puts_(&o, "</script>\n</body>\n</html>\n");
    if (o.too_big) {
        st = ct_error(CT_ERROR_VALUE, OP, "'%s' expands to more than 1 GiB of page", in);
        goto out;
    }
    if (fflush(f) != 0 || ferror(f)) {
        st = ct_error(CT_ERROR_IO, OP, "could not write '%s'", outpath);
        goto out;
    }
    st = CT_OK;
out:
    if (f && fclose(f) != 0 && st == CT_OK)
        st = ct_error(CT_ERROR_IO, OP, "could not write '%s'", outpath);
    if (st != CT_OK && f)
        remove(outpath);
    ct_value_free(doc);
    free(data);
    return st;
}
