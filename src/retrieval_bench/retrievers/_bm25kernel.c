/* BM25's per-query sum over the CSR rows of the query's terms, in one pass.
 *
 * Why: numpy needs three passes and two temporaries for it (concatenate the rows' postings,
 * bincount them with weights, a comparison over every passage for the matched set); here each
 * posting is read once and added into the score vector, and the matched passages are read off
 * the scores (or, where an IDF is not > 0, a one-byte mark per passage). The additions are the
 * same as bincount's, in the same order (row by row, i.e. query-token order, each passage
 * starting from 0.0), so the scores are bit-identical to rank_bm25's, as the numpy path's are;
 * compiled without fp contraction. The sum goes tile by tile of TILE passages, every row's
 * postings in the tile before the next tile's: a passage's additions keep their order, and a
 * tile's scores stay in cache while each common term's row adds to it, where row by row would
 * sweep the whole vector (8 MB at 1M passages) once per term.
 *
 * A posting holds a uint16 code into a table of saturated tfs (bm25_build.py: 6 bytes a posting
 * to stream instead of 12, which at 1M passages is what a query costs), and its weight is formed
 * here as idf[row] * table[code], the very product the build would have stored; or, where the
 * index has no table (more distinct values than codes), the float64 weight itself.
 *
 * Lucene's formula (bm25.variant=lucene; bm25_build.py) passes `lucene`: a repeated term is
 * then one clause weighted by its count (lucene_clauses: boost x idf in float32), the table
 * (or the postings) hold each posting's float32 denominator d = 1 + tf * cache[norm], a
 * posting adds the float32 `w - w / d`
 * (BM25Similarity's BM25Scorer.score, operation for operation), the double sums are those of
 * Lucene's disjunction scorers, and each sum is rounded to float32 (the `(float)` cast Lucene
 * ends with) before it is read, so the top k is chosen on Lucene's own scores.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define STRIDE 32 /* top_rows (with a mask) samples every STRIDE-th passage for its floor */
#define BLOCK 64   /* and looks one by one into blocks of BLOCK holding a score >= it; without
                    * a mask its floor is the k-th largest of these blocks' maxima */
#define TILE 32768 /* passages a tile: the sum runs tile by tile (add_tile), so a tile's 256 KiB
                    * of scores stay in the core's cache across the query's rows */
#define CODES 65536 /* a code table's entries (bm25_build.CODES): one per uint16, so no code
                     * reads past it */

#include "../_buffers.h"

/* The postings' values: uint16 codes into `table` (CODES float64), or float64 weights where
 * `table` is NULL. */
typedef struct {
    const void *values;
    const double *table;
    const float *qweights; /* Lucene's formula: each query row's weight; else NULL */
    float *const *contrib;  /* Lucene's formula, coded: a row's score per code, or NULL */
} Weights;

/* The first j in [lo, hi) with ix[j] >= doc (ix ascending there), hi where there is none. */
static inline int64_t first_at(const int32_t *ix, int64_t lo, int64_t hi, int64_t doc) {
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (ix[mid] < doc)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Lucene's `(float)` of each double sum in [t0, t1), in place: two at a time where SSE2 is
 * there (cvtpd2ps rounds to nearest as the C cast does). Callers round a tile while it is in
 * cache, in the pass that reads it where there is one (positives, top_rows' blocks). */
static void round_to_float(double *restrict s, int64_t t0, int64_t t1) {
    int64_t i = t0;
#if defined(__SSE2__)
    for (; i + 2 <= t1; i += 2)
        _mm_storeu_pd(s + i, _mm_cvtps_pd(_mm_cvtpd_ps(_mm_loadu_pd(s + i))));
#endif
    for (; i < t1; i++) s[i] = (double)(float)s[i];
}

/* The sum over the passages [t0, t1): row by row (query order), each passage from 0.0, as
 * bincount adds; a coded posting adds idf[row] * table[code], the product the build would
 * have stored. A passage's contributions are added in the same order whatever the tiles.
 * Lucene's sums are left in double: the caller rounds them (round_to_float). */
static void add_tile(const int64_t *restrict ip, const int32_t *restrict ix, Weights wt,
                     const double *restrict term_idf, const int64_t *restrict r,
                     Py_ssize_t n_rows, int64_t t0, int64_t t1, double *restrict s) {
    for (Py_ssize_t q = 0; q < n_rows; q++) {
        const int64_t from = first_at(ix, ip[r[q]], ip[r[q] + 1], t0);
        const int64_t end = first_at(ix, from, ip[r[q] + 1], t1);
        if (wt.qweights) { /* Lucene: w - w / d in float32, added in double */
            const float w = wt.qweights[q];
            if (!wt.table) {
                const double *restrict d = wt.values;
                for (int64_t j = from; j < end; j++) s[ix[j]] += (double)(w - w / (float)d[j]);
            } else if (wt.contrib && wt.contrib[q]) { /* the row's scores per code */
                const uint16_t *restrict c = wt.values;
                const float *restrict ct = wt.contrib[q];
                for (int64_t j = from; j < end; j++) s[ix[j]] += (double)ct[c[j]];
            } else {
                const uint16_t *restrict c = wt.values;
                const double *restrict t = wt.table;
                for (int64_t j = from; j < end; j++)
                    s[ix[j]] += (double)(w - w / (float)t[c[j]]);
            }
        } else if (!wt.table) {
            const double *restrict w = wt.values;
            for (int64_t j = from; j < end; j++) s[ix[j]] += w[j];
        } else {
            const uint16_t *restrict c = wt.values;
            const double *restrict t = wt.table;
            const double f = term_idf[r[q]];
            for (int64_t j = from; j < end; j++) s[ix[j]] += f * t[c[j]];
        }
    }
}

/* The whole sum, tile by tile: each tile's scores stay in cache across the rows, where a row
 * at a time would sweep the whole score vector once per common term; Lucene's rounded to
 * float32. */
static void add_rows(const int64_t *restrict ip, const int32_t *restrict ix, Weights wt,
                     const double *restrict term_idf, const int64_t *restrict r,
                     Py_ssize_t n_rows, Py_ssize_t n_docs, double *restrict s) {
    for (int64_t t0 = 0; t0 < n_docs; t0 += TILE) {
        const int64_t t1 = t0 + TILE < n_docs ? t0 + TILE : n_docs;
        add_tile(ip, ix, wt, term_idf, r, n_rows, t0, t1, s);
        if (wt.qweights) round_to_float(s, t0, t1);
    }
}

/* Appends to out[count...] the passages of [t0, t1) whose score is > 0, ascending; returns the
 * new count; with `to_float`, each score is first rounded to float32 in place (Lucene's cast,
 * in this pass rather than in one more over the tile, which cost Lucene's formula most of its
 * gap to the default's raw scores at 100,000 passages: BENCHMARKS.md). Branch-free (about half the passages match a query with a common term, so a
 * branch on each would be mispredicted half the time: 3.5x slower, measured): with SSE2, four
 * passages a step, their offsets read from a table by the comparison's mask and stored four at
 * a time (out has a slot per passage, so the ones past the count land in slots not yet
 * written): 0.48-0.77 ms against 0.70-1.06 ms over 1M scores for storing every passage and
 * advancing the count by its comparison (a standalone loop, BENCHMARKS.md). */
static Py_ssize_t positives(double *restrict s, int64_t t0, int64_t t1,
                            int64_t *restrict out, Py_ssize_t count, int to_float) {
    int64_t i = t0;
#if defined(__SSE2__)
    static const int64_t offsets[16][4] = {
        {0, 0, 0, 0}, {0, 0, 0, 0}, {1, 0, 0, 0}, {0, 1, 0, 0}, {2, 0, 0, 0}, {0, 2, 0, 0},
        {1, 2, 0, 0}, {0, 1, 2, 0}, {3, 0, 0, 0}, {0, 3, 0, 0}, {1, 3, 0, 0}, {0, 1, 3, 0},
        {2, 3, 0, 0}, {0, 2, 3, 0}, {1, 2, 3, 0}, {0, 1, 2, 3}};
    static const uint8_t bits[16] = {0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4};
    const __m128d zero = _mm_setzero_pd();
    for (; i + 4 <= t1; i += 4) {
        __m128d lo = _mm_loadu_pd(s + i), hi = _mm_loadu_pd(s + i + 2);
        if (to_float) {
            lo = _mm_cvtps_pd(_mm_cvtpd_ps(lo));
            hi = _mm_cvtps_pd(_mm_cvtpd_ps(hi));
            _mm_storeu_pd(s + i, lo);
            _mm_storeu_pd(s + i + 2, hi);
        }
        int m = _mm_movemask_pd(_mm_cmpgt_pd(lo, zero)) |
                _mm_movemask_pd(_mm_cmpgt_pd(hi, zero)) << 2;
        __m128i base = _mm_set1_epi64x(i);
        const __m128i *at = (const __m128i *)offsets[m];
        _mm_storeu_si128((__m128i *)(out + count), _mm_add_epi64(base, _mm_loadu_si128(at)));
        _mm_storeu_si128((__m128i *)(out + count + 2),
                         _mm_add_epi64(base, _mm_loadu_si128(at + 1)));
        count += bits[m];
    }
#endif
    for (; i < t1; i++) {
        if (to_float) s[i] = (double)(float)s[i];
        out[count] = i;
        count += s[i] > 0;
    }
    return count;
}

/* Lucene's formula over coded postings: for each row with more postings than the table has
 * codes in use (`n_codes`), its float32 score `w - w / d` per code, computed once per query
 * with the very operations a posting would make (the same floats), so the row's postings
 * gather a float instead of dividing: the division per posting is what makes the formula
 * slower than rank_bm25's product. *block and *rows: PyMem blocks the caller frees (NULL where
 * no row needs one); -1 with MemoryError set. */
static int lucene_tables(Weights *wt, const int64_t *ip, const int64_t *r, Py_ssize_t n_rows,
                         Py_ssize_t n_codes, float **block, float ***rows) {
    *block = NULL;
    *rows = NULL;
    if (!wt->qweights || !wt->table || n_codes <= 0 || n_codes > CODES) return 0;
    Py_ssize_t wanted = 0;
    for (Py_ssize_t q = 0; q < n_rows; q++) wanted += ip[r[q] + 1] - ip[r[q]] > n_codes;
    if (!wanted) return 0;
    *rows = PyMem_Calloc((size_t)n_rows, sizeof(float *));
    *block = PyMem_Malloc((size_t)wanted * (size_t)n_codes * sizeof(float));
    if (!*rows || !*block) {
        PyErr_NoMemory();
        return -1;
    }
    float *next = *block;
    for (Py_ssize_t q = 0; q < n_rows; q++) {
        if (ip[r[q] + 1] - ip[r[q]] <= n_codes) continue;
        const float w = wt->qweights[q];
        Py_ssize_t c = 0;
#if defined(__SSE2__)
        /* four codes a step: divps rounds each lane as divss does, so the same floats */
        const __m128 wv = _mm_set1_ps(w);
        for (; c + 4 <= n_codes; c += 4) {
            const __m128 d = _mm_movelh_ps(_mm_cvtpd_ps(_mm_loadu_pd(wt->table + c)),
                                           _mm_cvtpd_ps(_mm_loadu_pd(wt->table + c + 2)));
            _mm_storeu_ps(next + c, _mm_sub_ps(wv, _mm_div_ps(wv, d)));
        }
#endif
        for (; c < n_codes; c++) next[c] = w - w / (float)wt->table[c];
        (*rows)[q] = next;
        next += n_codes;
    }
    wt->contrib = (float *const *)*rows;
    return 0;
}

/* The postings' values from `values` and `table` (None: float64 weights), checked against the
 * number of postings; -1 with an exception set otherwise. */
static int get_weights(PyObject *values, PyObject *table, Buf *v, Buf *t, Py_ssize_t n_post,
                       Weights *wt) {
    int coded = table != Py_None;
    if (get(values, v, 0, "data", coded ? 2 : 8) < 0) return -1;
    if (coded && get(table, t, 0, "table", 8) < 0) return -1;
    if (v->view.len / v->view.itemsize != n_post || (coded && t->view.len / 8 != CODES)) {
        PyErr_SetString(PyExc_ValueError, "data or table: lengths do not agree");
        return -1;
    }
    wt->values = v->view.buf;
    wt->table = coded ? t->view.buf : NULL;
    return 0;
}

static void mark_rows(const int64_t *restrict ip, const int32_t *restrict ix,
                      const int64_t *restrict r, Py_ssize_t n_rows, uint8_t *restrict mk) {
    for (Py_ssize_t q = 0; q < n_rows; q++) {
        const int64_t end = ip[r[q] + 1];
        for (int64_t j = ip[r[q]]; j < end; j++) mk[ix[j]] = 1;
    }
}

/* The query's term rows from a Python sequence, each checked against the matrix (a row's
 * passages are ascending, as the caller's CSR has sorted indices, so its first and last bound
 * them all); *positive: every row's IDF is > 0, so every weight is. A PyMem block the caller
 * frees, or NULL with an exception set. */
static int64_t *read_rows(PyObject *row_list, const int64_t *ip, Py_ssize_t n_ptr,
                          const int32_t *ix, Py_ssize_t n_post, Py_ssize_t n_docs,
                          const double *term_idf, int *positive) {
    Py_ssize_t n_rows = PySequence_Fast_GET_SIZE(row_list);
    int64_t *r = PyMem_Malloc((size_t)(n_rows ? n_rows : 1) * sizeof(int64_t));
    if (!r) return (int64_t *)PyErr_NoMemory();
    *positive = 1;
    for (Py_ssize_t q = 0; q < n_rows; q++) {
        int64_t row = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(row_list, q));
        if (row == -1 && PyErr_Occurred()) goto fail;
        if (row < 0 || row + 1 >= n_ptr || ip[row] < 0 || ip[row] > ip[row + 1] ||
            ip[row + 1] > n_post) {
            PyErr_SetString(PyExc_IndexError, "a row outside the matrix");
            goto fail;
        }
        if (ip[row] < ip[row + 1] && (ix[ip[row]] < 0 || ix[ip[row + 1] - 1] >= n_docs)) {
            PyErr_SetString(PyExc_IndexError, "a passage outside the score vector");
            goto fail;
        }
        *positive &= term_idf[row] > 0;
        r[q] = row;
    }
    return r;
fail:
    PyMem_Free(r);
    return NULL;
}

/* Lucene's query (Anserini's bag of words): one clause per distinct term, boosted by its
 * count. r[0:*n_rows] becomes each distinct row once, in first-occurrence order, and
 * *weights (a PyMem block the caller frees) each clause's float32 `(float)count * (float)idf`,
 * BM25Scorer's boost * idf. Repeats are found through an open-addressing table of twice the
 * rows (a long query costs linear time); done here rather than in Python, where counting a
 * query's terms and gathering their weights took longer than scoring SciFact's 5,183 passages.
 * -1 with MemoryError set. */
static int lucene_clauses(int64_t *r, Py_ssize_t *n_rows, const double *term_idf,
                          float **weights) {
    const Py_ssize_t n = *n_rows;
    int bits = 4;
    while (((Py_ssize_t)1 << bits) < 2 * n) bits++;
    const Py_ssize_t size = (Py_ssize_t)1 << bits;
    Py_ssize_t *slot = PyMem_Malloc((size_t)(size + n) * sizeof(Py_ssize_t));
    *weights = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(float));
    if (!slot || !*weights) {
        PyMem_Free(slot);
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t *count = slot + size, distinct = 0;
    for (Py_ssize_t i = 0; i < size; i++) slot[i] = -1;
    for (Py_ssize_t q = 0; q < n; q++) {
        Py_ssize_t h = (Py_ssize_t)(((uint64_t)r[q] * 0x9E3779B97F4A7C15ull) >> (64 - bits));
        while (slot[h] >= 0 && r[slot[h]] != r[q]) h = (h + 1) & (size - 1);
        if (slot[h] >= 0) {
            count[slot[h]]++;
            continue;
        }
        slot[h] = distinct;
        count[distinct] = 1;
        r[distinct++] = r[q];
    }
    for (Py_ssize_t q = 0; q < distinct; q++)
        (*weights)[q] = (float)count[q] * (float)term_idf[r[q]];
    PyMem_Free(slot);
    *n_rows = distinct;
    return 0;
}

/* score_rows(indptr, indices, data, table, idf, rows, scores, matched) -> count
 *   indptr: int64 row starts; indices: int32 passage of each posting, ascending within a row;
 *   data: uint16 code of each posting into table (float64, CODES entries), or, with table
 *   None, float64 weight; idf: float64 per row (a row whose IDF is > 0 has only positive
 *   weights); rows: a list of term rows in query order (a repeated term repeated)
 *   scores: float64, one per passage, whatever it holds (each is set)
 *   matched: int64, one per passage at least; its first `count` entries are set to the
 *   passages sharing a row, ascending.
 *   lucene (Lucene's formula): table/data hold float32 denominators, idf Lucene's idf, and a
 *   repeated row is one clause whose weight carries its count; sure_positive: False where a
 *   Lucene term score may round to 0 (a denominator too close to 1), so matches are marked,
 *   not read off the scores; n_codes: the codes in use in table (lucene_tables). */
static PyObject *score_rows(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[8];
    int lucene = 0, sure_positive = 1;
    Py_ssize_t n_codes = 0;
    if (!PyArg_ParseTuple(args, "OOOOOOOO|ppn:score_rows", &o[0], &o[1], &o[2], &o[7], &o[3],
                          &o[4], &o[5], &o[6], &lucene, &sure_positive, &n_codes))
        return NULL;
    float *contrib_block = NULL, **contrib_rows = NULL, *qweights = NULL;
    Buf indptr = {0}, indices = {0}, data = {0}, table = {0}, idf = {0}, scores = {0},
        matched = {0};
    PyObject *result = NULL, *row_list = NULL;
    int64_t *r = NULL;
    uint8_t *mk = NULL;
    Weights wt = {0};
    if (get(o[0], &indptr, 0, "indptr", 8) < 0 || get(o[1], &indices, 0, "indices", 4) < 0 ||
        get_weights(o[2], o[7], &data, &table, indices.view.len / 4, &wt) < 0 ||
        get(o[3], &idf, 0, "idf", 8) < 0 || get(o[5], &scores, 1, "scores", 8) < 0 ||
        get(o[6], &matched, 1, "matched", 8) < 0)
        goto done;
    row_list = PySequence_Fast(o[4], "rows must be a sequence of ints");
    if (!row_list) goto done;
    const int64_t *ip = indptr.view.buf;
    const int32_t *ix = indices.view.buf;
    const double *term_idf = idf.view.buf;
    double *s = scores.view.buf;
    int64_t *out = matched.view.buf;
    Py_ssize_t n_rows = PySequence_Fast_GET_SIZE(row_list), n_ptr = indptr.view.len / 8;
    Py_ssize_t n_docs = scores.view.len / 8, n_post = indices.view.len / 4;
    if (matched.view.len / 8 < n_docs || idf.view.len / 8 != n_ptr - 1) {
        PyErr_SetString(PyExc_ValueError, "score_rows: array lengths do not agree");
        goto done;
    }
    int positive;
    r = read_rows(row_list, ip, n_ptr, ix, n_post, n_docs, term_idf, &positive);
    if (!r) goto done;
    positive &= sure_positive;
    if (lucene) {
        if (lucene_clauses(r, &n_rows, term_idf, &qweights) < 0) goto done;
        wt.qweights = qweights;
    }
    if (lucene_tables(&wt, ip, r, n_rows, n_codes, &contrib_block, &contrib_rows) < 0) goto done;
    Py_ssize_t count = 0;
    /* Tile by tile: zeroed, summed, and (every contribution > 0: matched iff the score is > 0)
     * read for the matched passages while in cache, instead of three passes over the scores. */
    for (int64_t t0 = 0; t0 < n_docs; t0 += TILE) {
        const int64_t t1 = t0 + TILE < n_docs ? t0 + TILE : n_docs;
        memset(s + t0, 0, (size_t)(t1 - t0) * sizeof(double));
        add_tile(ip, ix, wt, term_idf, r, n_rows, t0, t1, s);
        if (positive)
            count = positives(s, t0, t1, out, count, wt.qweights != NULL);
        else if (wt.qweights)
            round_to_float(s, t0, t1);
    }
    if (!positive) {
        mk = PyMem_Calloc((size_t)(n_docs ? n_docs : 1), 1);
        if (!mk) {
            PyErr_NoMemory();
            goto done;
        }
        mark_rows(ip, ix, r, n_rows, mk);
        for (Py_ssize_t i = 0; i < n_docs; i++) {
            out[count] = i;
            count += mk[i] != 0;
        }
    }
    result = PyLong_FromSsize_t(count);
done:
    PyMem_Free(r);
    PyMem_Free(mk);
    Py_XDECREF(row_list);
    release(&indptr);
    release(&indices);
    release(&data);
    release(&table);
    release(&idf);
    release(&scores);
    release(&matched);
    PyMem_Free(qweights);
    PyMem_Free(contrib_block);
    PyMem_Free(contrib_rows);
    return result;
}

/* ---- top_rows: the scores' best k, without materialising the score vector -------------- */

typedef struct {
    double score;
    int64_t order; /* the tie-break key: a larger id_order wins a tie */
    int64_t index;
} Entry;

/* a is worse than b: lower score, or the same score and the lower tie-break key */
static inline int worse(const Entry *a, const Entry *b) {
    return a->score < b->score || (a->score == b->score && a->order < b->order);
}

/* Whether any of s[0:n] is >= floor (a NaN is not): two lanes at a time where SSE2 is there
 * (every x86-64), which GCC does not do by itself for this loop. */
static inline int reaches(const double *s, Py_ssize_t n, double floor) {
    int hit = 0;
    Py_ssize_t i = 0;
#if defined(__SSE2__)
    __m128d lanes = _mm_setzero_pd(), bound = _mm_set1_pd(floor);
    for (; i + 2 <= n; i += 2) lanes = _mm_or_pd(lanes, _mm_cmpge_pd(_mm_loadu_pd(s + i), bound));
    hit = _mm_movemask_pd(lanes);
#endif
    for (; i < n; i++) hit |= s[i] >= floor;
    return hit != 0;
}

/* The largest of s[0:n] (n > 0; scores are never NaN). */
static inline double block_max(const double *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    double best = s[0];
#if defined(__SSE2__)
    if (n >= 2) {
        __m128d lanes = _mm_loadu_pd(s);
        for (i = 2; i + 2 <= n; i += 2) lanes = _mm_max_pd(lanes, _mm_loadu_pd(s + i));
        double pair[2];
        _mm_storeu_pd(pair, lanes);
        best = pair[0] > pair[1] ? pair[0] : pair[1];
    }
#endif
    for (; i < n; i++) best = s[i] > best ? s[i] : best;
    return best;
}

/* Bit i set where s[i] >= floor, for a block of n <= 64. */
static inline uint64_t at_or_above(const double *s, Py_ssize_t n, double floor) {
    uint64_t bits = 0;
    Py_ssize_t i = 0;
#if defined(__SSE2__)
    __m128d bound = _mm_set1_pd(floor);
    for (; i + 2 <= n; i += 2)
        bits |= (uint64_t)_mm_movemask_pd(_mm_cmpge_pd(_mm_loadu_pd(s + i), bound)) << i;
#endif
    for (; i < n; i++) bits |= (uint64_t)(s[i] >= floor) << i;
    return bits;
}

/* A min-heap of doubles, its least at h[0]: push v onto the n held (n grows by one). */
static void heap_push(double *h, Py_ssize_t *n, double v) {
    Py_ssize_t i = (*n)++;
    while (i > 0 && h[(i - 1) / 2] > v) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = v;
}

/* The heap's least of the n replaced by v. */
static void heap_replace_least(double *h, Py_ssize_t n, double v) {
    Py_ssize_t i = 0;
    for (;;) {
        Py_ssize_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && h[c + 1] < h[c]) c++;
        if (h[c] >= v) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = v;
}

/* Reorders entries so that the best k (by `worse`) come first, in any order: quickselect. */
static void select_best(Entry *entries, Py_ssize_t n, Py_ssize_t k) {
    Py_ssize_t lo = 0, hi = n - 1, want = k - 1;
    while (lo < hi) {
        Entry pivot = entries[lo + (hi - lo) / 2];
        Py_ssize_t i = lo, j = hi;
        while (i <= j) {
            while (worse(&pivot, &entries[i])) i++; /* entries[i] better than the pivot */
            while (worse(&entries[j], &pivot)) j--;
            if (i <= j) {
                Entry t = entries[i];
                entries[i] = entries[j];
                entries[j] = t;
                i++;
                j--;
            }
        }
        if (want <= j)
            hi = j;
        else if (want >= i)
            lo = i;
        else
            return;
    }
}

/* Appends e to the pool, growing it (first to 4 want + 64 entries, then doubling); -1 with
 * MemoryError set where it cannot grow. */
static int keep(Entry **pool, Py_ssize_t *size, Py_ssize_t *cap, Py_ssize_t want, Entry e) {
    if (*size == *cap) {
        Py_ssize_t grown_cap = *cap ? 2 * *cap : 4 * want + 64;
        Entry *grown = PyMem_Realloc(*pool, (size_t)grown_cap * sizeof(Entry));
        if (!grown) {
            PyErr_NoMemory();
            return -1;
        }
        *pool = grown;
        *cap = grown_cap;
    }
    (*pool)[(*size)++] = e;
    return 0;
}

static int best_first(const void *x, const void *y) {
    const Entry *a = x, *b = y;
    if (worse(a, b)) return 1;
    if (worse(b, a)) return -1;
    return 0;
}

/* top_rows(indptr, indices, data, table, idf, rows, id_order, k, allowed, scratch, out_index,
 *          out_score[, lucene, sure_positive, n_codes]) -> (count, any_matched, any_allowed)
 *   indptr, indices, data, table, idf, rows, lucene, sure_positive, n_codes: as score_rows.
 *   The same sum as score_rows into `scratch` (float64 zeros, one per passage; left zeroed),
 *   then the best k matched passages that `allowed` (uint8 per passage, or None) lets through,
 *   by score descending then id_order descending (TieBreak.top's order), written best first
 *   to out_index (int64, >= k) and out_score (float64, >= k). any_matched: a passage shares
 *   a row; any_allowed: one of those is allowed. */
static PyObject *top_rows(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[12];
    Py_ssize_t k, n_codes = 0;
    int lucene = 0, sure_positive = 1;
    if (!PyArg_ParseTuple(args, "OOOOOOOnOOOO|ppn:top_rows", &o[0], &o[1], &o[2], &o[11], &o[3],
                          &o[4], &o[5], &k, &o[7], &o[8], &o[9], &o[10], &lucene,
                          &sure_positive, &n_codes))
        return NULL;
    float *contrib_block = NULL, **contrib_rows = NULL, *qweights = NULL;
    Buf indptr = {0}, indices = {0}, data = {0}, table = {0}, idf = {0}, order = {0},
        allowed = {0}, scratch = {0}, out_index = {0}, out_score = {0};
    PyObject *result = NULL, *row_list = NULL;
    int64_t *r = NULL;
    uint8_t *mk = NULL;
    Entry *pool = NULL;
    Entry *samples = NULL;
    int use_allowed = o[7] != Py_None;
    Weights wt = {0};
    if (get(o[0], &indptr, 0, "indptr", 8) < 0 || get(o[1], &indices, 0, "indices", 4) < 0 ||
        get_weights(o[2], o[11], &data, &table, indices.view.len / 4, &wt) < 0 ||
        get(o[3], &idf, 0, "idf", 8) < 0 || get(o[5], &order, 0, "id_order", 8) < 0 ||
        (use_allowed && get(o[7], &allowed, 0, "allowed", 1) < 0) ||
        get(o[8], &scratch, 1, "scratch", 8) < 0 || get(o[9], &out_index, 1, "out_index", 8) < 0 ||
        get(o[10], &out_score, 1, "out_score", 8) < 0)
        goto done;
    row_list = PySequence_Fast(o[4], "rows must be a sequence of ints");
    if (!row_list) goto done;
    const int64_t *ip = indptr.view.buf, *key = order.view.buf;
    const int32_t *ix = indices.view.buf;
    const double *term_idf = idf.view.buf;
    const uint8_t *ok = use_allowed ? allowed.view.buf : NULL;
    double *s = scratch.view.buf;
    int64_t *top_index = out_index.view.buf;
    double *top_score = out_score.view.buf;
    Py_ssize_t n_rows = PySequence_Fast_GET_SIZE(row_list), n_ptr = indptr.view.len / 8;
    Py_ssize_t n_docs = scratch.view.len / 8, n_post = indices.view.len / 4;
    if (k < 0 || order.view.len / 8 != n_docs || (use_allowed && allowed.view.len != n_docs) ||
        out_index.view.len / 8 < k || out_score.view.len / 8 < k ||
        idf.view.len / 8 != n_ptr - 1) {
        PyErr_SetString(PyExc_ValueError, "top_rows: array lengths do not agree");
        goto done;
    }
    int positive;
    r = read_rows(row_list, ip, n_ptr, ix, n_post, n_docs, term_idf, &positive);
    if (!r) goto done;
    positive &= sure_positive;
    if (lucene) {
        if (lucene_clauses(r, &n_rows, term_idf, &qweights) < 0) goto done;
        wt.qweights = qweights;
    }
    if (lucene_tables(&wt, ip, r, n_rows, n_codes, &contrib_block, &contrib_rows) < 0) goto done;
    /* Whether any passage matched: any posting at all (each posting's passage shares a
     * row). Counting them would cost a pass over every passage; the caller needs only this. */
    int any_matched = 0;
    for (Py_ssize_t q = 0; q < n_rows; q++) any_matched |= ip[r[q] + 1] > ip[r[q]];
    Py_ssize_t size = 0, cap = 0;
    /* With no mask and only positive weights (a passage is matched iff its score is > 0), the
     * floor comes from the blocks themselves: the k-th largest of the blocks' maxima. At
     * least k blocks reach it, each with a passage scoring its maximum, so at least k matched
     * passages score >= floor and the whole top k (ties included) does, inside those blocks.
     * All of it tile by tile, while the tile is in cache: the tile's sum, its blocks' maxima
     * (a vectorised pass) into a heap of the k largest maxima so far, whose least is a running
     * floor, never above the final one (the k-th largest of some maxima is at most the k-th
     * largest of all); then, from the tile's blocks that reach the running floor only, the
     * passages >= it, read off a comparison mask; then the tile is zeroed. Every passage >= the
     * final floor is >= the running floor of its tile, so it is kept; the pool may hold a few
     * more, cut by the partial sort. (Fewer than k matched blocks: floor 0, every matched
     * passage kept.) Lucene's float32 rounding is monotone, so a block's rounded maximum is its
     * maximum rounded: only the blocks that reach the floor are rounded, passage by passage,
     * before they are compared: the same scores as rounding every tile, without the pass over
     * it (BENCHMARKS.md). */
    if (any_matched && k > 0 && positive && !ok) {
        Py_ssize_t n_blocks = (n_docs + BLOCK - 1) / BLOCK;
        Py_ssize_t held = 0, want = k <= n_blocks ? k : 0; /* 0: the floor stays 0 */
        double *heap = PyMem_Malloc((size_t)(want ? want : 1) * sizeof(double));
        if (!heap) {
            PyErr_NoMemory();
            goto done;
        }
        double maxima[TILE / BLOCK], bound = 0.0;
        for (int64_t t0 = 0; t0 < n_docs; t0 += TILE) {
            const int64_t t1 = t0 + TILE < n_docs ? t0 + TILE : n_docs;
            add_tile(ip, ix, wt, term_idf, r, n_rows, t0, t1, s);
            const Py_ssize_t n_tile = (t1 - t0 + BLOCK - 1) / BLOCK;
            for (Py_ssize_t b = 0; b < n_tile; b++) {
                const int64_t start = t0 + b * BLOCK, stop = b + 1 < n_tile ? start + BLOCK : t1;
                double m = block_max(s + start, stop - start);
                if (wt.qweights) m = (double)(float)m;
                maxima[b] = m;
                if (!want || !(m > 0)) continue;
                if (held < want)
                    heap_push(heap, &held, m);
                else if (m > heap[0])
                    heap_replace_least(heap, held, m);
            }
            if (want && held == want) bound = heap[0];
            for (Py_ssize_t b = 0; b < n_tile; b++) {
                if (!(maxima[b] >= bound && maxima[b] > 0)) continue;
                const int64_t start = t0 + b * BLOCK;
                const int64_t stop = b + 1 < n_tile ? start + BLOCK : t1;
                if (wt.qweights) round_to_float(s, start, stop);
                uint64_t bits = at_or_above(s + start, stop - start, bound);
                while (bits) {
                    Py_ssize_t i = start + __builtin_ctzll(bits);
                    bits &= bits - 1;
                    if (!(s[i] > 0)) continue;
                    Entry e = {s[i], key[i], i};
                    if (keep(&pool, &size, &cap, k, e) < 0) {
                        memset(s, 0, (size_t)n_docs * sizeof(double));
                        PyMem_Free(heap);
                        goto done;
                    }
                }
            }
            memset(s + t0, 0, (size_t)(t1 - t0) * sizeof(double));
        }
        PyMem_Free(heap);
        goto select;
    }
    add_rows(ip, ix, wt, term_idf, r, n_rows, n_docs, s);
    if (!positive) {
        mk = PyMem_Calloc((size_t)(n_docs ? n_docs : 1), 1);
        if (!mk) {
            PyErr_NoMemory();
            memset(s, 0, (size_t)n_docs * sizeof(double));
            goto done;
        }
        mark_rows(ip, ix, r, n_rows, mk);
    }
    /* Otherwise a floor first, from every STRIDE-th eligible passage: the (2k / STRIDE + 2)-th best of
     * those samples, so about 2k + 2 STRIDE passages score at or above it. One pass then
     * keeps the eligible passages at or above the floor, looking one by one only into blocks
     * of BLOCK that hold such a score (a test over the block the compiler vectorises; few
     * blocks pass it). If fewer than k were kept, the floor may cut into the top k: the pass
     * is redone without it. Otherwise at least k eligible passages score >= floor, so the
     * k-th best does, and every member of the top k, ties included, was kept. The kept ones
     * are then partially sorted. */
    Py_ssize_t n_samples = 0;
    double floor = -HUGE_VAL;
    Py_ssize_t want = k > 0 ? k : 1; /* k = 0 still asks whether any passage is eligible */
    samples = PyMem_Malloc((size_t)(n_docs / STRIDE + 1) * sizeof(Entry));
    if (!samples) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; any_matched && i < n_docs; i += STRIDE) {
        if (!(positive ? s[i] > 0 : mk[i] != 0) || (ok && !ok[i])) continue;
        Entry e = {s[i], 0, i};
        samples[n_samples++] = e;
    }
    Py_ssize_t rank = 2 * want / STRIDE + 2;
    if (n_samples >= rank) { /* the rank-th best sample's score: the worst of the best `rank` */
        select_best(samples, n_samples, rank);
        floor = samples[0].score;
        for (Py_ssize_t i = 1; i < rank; i++)
            floor = samples[i].score < floor ? samples[i].score : floor;
    }
    /* Each block is zeroed as soon as it is read (the scratch is left as it came without a
     * second pass over it); a second attempt adds the rows again, the same sums bit for bit. */
    for (int attempt = 0; any_matched && attempt < 2; attempt++) {
        size = 0;
        for (Py_ssize_t start = 0; start < n_docs; start += BLOCK) {
            Py_ssize_t stop = start + BLOCK < n_docs ? start + BLOCK : n_docs;
            if (reaches(s + start, stop - start, floor)) {
                for (Py_ssize_t i = start; i < stop; i++) {
                    if (!(s[i] >= floor) || !(positive ? s[i] > 0 : mk[i] != 0) ||
                        (ok && !ok[i]))
                        continue;
                    Entry e = {s[i], key[i], i};
                    if (keep(&pool, &size, &cap, want, e) < 0) {
                        memset(s, 0, (size_t)n_docs * sizeof(double));
                        goto done;
                    }
                }
            }
            memset(s + start, 0, (size_t)(stop - start) * sizeof(double));
        }
        if (size >= want || floor == -HUGE_VAL) break;
        floor = -HUGE_VAL;
        add_rows(ip, ix, wt, term_idf, r, n_rows, n_docs, s);
    }
select:;
    int any_allowed = size > 0;
    if (size > k) {
        select_best(pool, size, k);
        size = k;
    }
    qsort(pool, (size_t)size, sizeof(Entry), best_first);
    for (Py_ssize_t i = 0; i < size; i++) {
        top_index[i] = pool[i].index;
        top_score[i] = pool[i].score;
    }
    result = Py_BuildValue("nii", size, any_matched, any_allowed);
done:
    PyMem_Free(r);
    PyMem_Free(mk);
    PyMem_Free(pool);
    PyMem_Free(samples);
    Py_XDECREF(row_list);
    release(&indptr);
    release(&indices);
    release(&data);
    release(&table);
    release(&idf);
    release(&order);
    release(&allowed);
    release(&scratch);
    release(&out_index);
    release(&out_score);
    PyMem_Free(qweights);
    PyMem_Free(contrib_block);
    PyMem_Free(contrib_rows);
    return result;
}

static PyMethodDef methods[] = {
    {"score_rows", score_rows, METH_VARARGS,
     "score_rows(indptr, indices, data, table, idf, rows, scores, matched) -> count of "
     "matched passages"},
    {"top_rows", top_rows, METH_VARARGS,
     "top_rows(indptr, indices, data, table, idf, rows, id_order, k, allowed, scratch, "
     "out_index, out_score) -> (count, any_matched, any_allowed)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_bm25kernel", "BM25's per-query sum over CSR rows.", -1, methods,
    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__bm25kernel(void) { return PyModule_Create(&module); }
