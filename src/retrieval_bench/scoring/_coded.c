/* The integer core's pass over the rankings (scoring/metrics.py, build_ranked_grades_coded),
 * one row at a time: the duplicate check, the padding check, each row's length within k and
 * where the row's labels sit in its top k.
 *
 * Why: in numpy these are a row-wise sort (duplicates), two boolean passes (lengths and
 * padding) and a Bloom filter plus a vectorised binary search (labels), each over the whole
 * (queries x depth) matrix with its temporaries; together they were two thirds of scoring a
 * job's full measure set. Here each ranked code is read once, while its row is in cache.
 * Integers only: the metrics computed from these positions stay in numpy, unchanged.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "../_buffers.h"

#define GOLDEN 0x9E3779B97F4A7C15ull

/* match_rows(rankings, depth, sorted_ids, width, k, check, lengths, row, rank, column)
 *     -> (matches, duplicate_row, padding_row)
 *   rankings: int64 (n, depth), best first, padded with codes < 0 at the end;
 *   sorted_ids: int64 (n, width), each row's label codes ascending (padding < 0 first);
 *   lengths: int64 (n): codes >= 0 within the first k (filled);
 *   row, rank, column: int64, n * width at least: every ranked code within the first k that
 *   is one of its row's labels, by (row, rank), with its column in sorted_ids (filled).
 *   With check: duplicate_row is the first row holding a code >= 0 twice anywhere, and
 *   padding_row the first row with a code < 0 before a code >= 0 (-1: none); without, both -1.
 *   Rows are matched whatever the checks find; the caller raises on them first. matches is
 *   -1 when the matches outgrow n * width (a row holding a label twice, unchecked): the
 *   caller then takes the numpy path, which keeps every such match. */
static PyObject *match_rows(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[10];
    Py_ssize_t depth, width, k;
    int check;
    if (!PyArg_ParseTuple(args, "OnOnnpOOOO:match_rows", &o[0], &depth, &o[2], &width, &k,
                          &check, &o[6], &o[7], &o[8], &o[9]))
        return NULL;
    Buf rankings = {0}, sorted_ids = {0}, lengths = {0}, row = {0}, rank = {0}, column = {0};
    PyObject *result = NULL;
    uint64_t *slots = NULL;
    Py_ssize_t *stamps = NULL;
    if (get(o[0], &rankings, 0, "rankings", 8) < 0 || get(o[2], &sorted_ids, 0, "ids", 8) < 0 ||
        get(o[6], &lengths, 1, "lengths", 8) < 0 || get(o[7], &row, 1, "row", 8) < 0 ||
        get(o[8], &rank, 1, "rank", 8) < 0 || get(o[9], &column, 1, "column", 8) < 0)
        goto done;
    Py_ssize_t n = lengths.view.len / 8;
    if (depth < 0 || width < 0 || k < 0 || rankings.view.len / 8 != n * depth ||
        sorted_ids.view.len / 8 != n * width || row.view.len / 8 < n * width ||
        rank.view.len / 8 < n * width || column.view.len / 8 < n * width) {
        PyErr_SetString(PyExc_ValueError, "match_rows: array shapes do not agree");
        goto done;
    }
    const int64_t *codes = rankings.view.buf, *ids = sorted_ids.view.buf;
    int64_t *len_out = lengths.view.buf, *row_out = row.view.buf, *rank_out = rank.view.buf,
            *col_out = column.view.buf;
    Py_ssize_t cap = 16;
    while (cap < 2 * depth) cap *= 2;
    int shift = 0;
    while (((Py_ssize_t)1 << shift) < cap) shift++;
    shift = 64 - shift;
    if (check) { /* a hash set per row, its slots stamped with the row: never cleared */
        slots = PyMem_Malloc((size_t)cap * sizeof(uint64_t));
        stamps = PyMem_Malloc((size_t)cap * sizeof(Py_ssize_t));
        if (!slots || !stamps) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t i = 0; i < cap; i++) stamps[i] = -1;
    }
    Py_ssize_t matches = 0, duplicate_row = -1, padding_row = -1;
    int overflow = 0;
    Py_ssize_t top = k < depth ? k : depth;
    for (Py_ssize_t q = 0; q < n; q++) {
        const int64_t *r = codes + q * depth, *labels = ids + q * width;
        if (check) {
            int seen_padding = 0;
            for (Py_ssize_t j = 0; j < depth; j++) {
                int64_t code = r[j];
                if (code < 0) {
                    seen_padding = 1;
                    continue;
                }
                if (seen_padding && padding_row < 0) padding_row = q;
                if (duplicate_row >= 0) continue;
                uint64_t h = ((uint64_t)code * GOLDEN) >> shift;
                while (stamps[h] == q && slots[h] != (uint64_t)code) h = (h + 1) & (cap - 1);
                if (stamps[h] == q) {
                    duplicate_row = q;
                    continue;
                }
                stamps[h] = q;
                slots[h] = (uint64_t)code;
            }
        }
        /* the labels' Bloom filter (bit code % 64), then a lower bound in the sorted labels */
        uint64_t bloom = 0;
        Py_ssize_t first = 0; /* labels[first:] are the codes >= 0 */
        for (Py_ssize_t c = 0; c < width; c++) {
            if (labels[c] < 0)
                first = c + 1;
            else
                bloom |= 1ull << (labels[c] & 63);
        }
        Py_ssize_t present = 0;
        for (Py_ssize_t j = 0; j < top; j++) {
            int64_t code = r[j];
            if (code < 0) continue;
            present++;
            if (!((bloom >> (code & 63)) & 1)) continue;
            Py_ssize_t lo = first, hi = width;
            while (lo < hi) {
                Py_ssize_t mid = lo + (hi - lo) / 2;
                if (labels[mid] < code)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            if (lo < width && labels[lo] == code) {
                if (matches == n * width) { /* only a ranking holding a code twice gets here */
                    overflow = 1;
                    break;
                }
                row_out[matches] = q;
                rank_out[matches] = j;
                col_out[matches] = lo;
                matches++;
            }
        }
        len_out[q] = present;
        if (overflow) break;
    }
    result = Py_BuildValue("nnn", overflow ? -1 : matches, duplicate_row, padding_row);
done:
    PyMem_Free(slots);
    PyMem_Free(stamps);
    release(&rankings);
    release(&sorted_ids);
    release(&lengths);
    release(&row);
    release(&rank);
    release(&column);
    return result;
}

static PyMethodDef methods[] = {
    {"match_rows", match_rows, METH_VARARGS,
     "match_rows(rankings, depth, sorted_ids, width, k, check, lengths, row, rank, column) -> "
     "(matches, duplicate_row, padding_row)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_coded", "The integer scorer's pass over the rankings.", -1, methods,
    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__coded(void) { return PyModule_Create(&module); }
