/* jieba 0.42.1's accurate-mode cut (`Tokenizer.lcut(text, HMM=...)`), compiled.
 *
 * Why: jieba spends ~3.5 us of Python per character; a million passages take 335 s on two
 * cores, which is most of a cold BM25 job. This is the same algorithm on the same data, so the
 * same tokens, at C speed:
 *
 *  - the text is split as jieba's `re_han_default` / `re_skip_default` split it (the character
 *    classes are spelled out below; whitespace is Python's own `str.isspace`);
 *  - a block is cut by `get_DAG` + `calc` over the prefix dictionary FREQ (held here as a trie
 *    whose nodes carry FREQ's value, or -1 for a string FREQ does not hold), with the same
 *    float operations in the same order (`log(freq) - logtotal + route[x + 1]`, compiled
 *    without contraction or fast-math) and the same tie-break (the largest end wins a tie,
 *    as Python's `max` over `(prob, x)` tuples picks it);
 *  - runs of single characters that FREQ does not hold go through finalseg's HMM Viterbi with
 *    finalseg's own probability tables, again with its tie-break (`max` over `(prob, state)`
 *    tuples: the later letter of B < E < M < S wins a tie), and finalseg's `re_han` /
 *    `re_skip` split, and its Force_Split_Words set (read at cut time, as jieba reads it).
 *
 * The engine is a snapshot: it is built from a jieba.Tokenizer's FREQ and total after the
 * user words are added (segment/engine.py) and does not see later changes to them. Every
 * token is a substring of the input, returned as a new str. Nothing here allocates per
 * character beyond the output strings; the GIL is held throughout.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__FAST_MATH__)
#error "_dagcut must be compiled without -ffast-math: its floats must match Python's"
#endif

/* HMM states indexed in the order of their letters, so comparing indices compares letters. */
enum { ST_B = 0, ST_E = 1, ST_M = 2, ST_S = 3 };
/* finalseg.PrevStatus, each pair in index order (lower letter first). */
static const int PREV[4][2] = {
    [ST_B] = {ST_E, ST_S}, [ST_E] = {ST_B, ST_M}, [ST_M] = {ST_B, ST_M}, [ST_S] = {ST_E, ST_S}};

#define GOLDEN 0x9E3779B97F4A7C15ull
#define ROOT_DIRECT 0x10000 /* the root's children are an array over the BMP: every walk starts there */

typedef struct {
    PyObject_HEAD
    /* trie edges: open addressing, key = ((parent << 21) | codepoint) + 1, 0 = empty */
    uint64_t *keys;
    int32_t *vals;
    uint64_t cap; /* power of two */
    int shift;    /* 64 - log2(cap) */
    Py_ssize_t used;
    /* trie nodes; node 0 is the empty string */
    int64_t *freq;   /* FREQ[s], or -1 where s is not in FREQ */
    double *weight;  /* log(FREQ[s]) - logtotal where FREQ[s] > 0 */
    int32_t n_nodes, cap_nodes;
    int32_t *root; /* children of the root for code points below ROOT_DIRECT, -1 = none */
    double logtotal;
    /* finalseg */
    double start[4];
    double trans[4][4];
    double min_float;
    uint64_t *emit_keys; /* codepoint + 1, 0 = empty */
    int32_t *emit_vals;
    uint64_t emit_cap;
    int emit_shift;
    double (*emit)[4];
    int32_t n_emit;
    PyObject *force_split; /* a set, read at cut time */
    int32_t *table;        /* translate(): BMP code point -> index in replacements, or -1 */
    PyObject *replacements;
} Engine;

static int log2_of(uint64_t cap) {
    int s = 0;
    while ((1ull << s) < cap) s++;
    return s;
}

static inline int32_t child(const Engine *e, int32_t node, Py_UCS4 cp) {
    if (node == 0 && cp < ROOT_DIRECT) return e->root[cp];
    uint64_t key = ((((uint64_t)node) << 21) | cp) + 1;
    uint64_t i = (key * GOLDEN) >> e->shift;
    const uint64_t mask = e->cap - 1;
    for (;;) {
        uint64_t k = e->keys[i];
        if (k == key) return e->vals[i];
        if (k == 0) return -1;
        i = (i + 1) & mask;
    }
}

static int grow_edges(Engine *e) {
    uint64_t old_cap = e->cap, new_cap = old_cap ? old_cap * 2 : 1024;
    uint64_t *old_keys = e->keys;
    int32_t *old_vals = e->vals;
    uint64_t *keys = PyMem_Calloc(new_cap, sizeof(uint64_t));
    int32_t *vals = PyMem_Malloc(new_cap * sizeof(int32_t));
    if (!keys || !vals) {
        PyMem_Free(keys);
        PyMem_Free(vals);
        PyErr_NoMemory();
        return -1;
    }
    int shift = 64 - log2_of(new_cap);
    for (uint64_t j = 0; j < old_cap; j++) {
        uint64_t k = old_keys[j];
        if (!k) continue;
        uint64_t i = (k * GOLDEN) >> shift;
        while (keys[i]) i = (i + 1) & (new_cap - 1);
        keys[i] = k;
        vals[i] = old_vals[j];
    }
    PyMem_Free(old_keys);
    PyMem_Free(old_vals);
    e->keys = keys;
    e->vals = vals;
    e->cap = new_cap;
    e->shift = shift;
    return 0;
}

static int32_t new_node(Engine *e) {
    if (e->n_nodes == e->cap_nodes) {
        int32_t cap = e->cap_nodes ? e->cap_nodes * 2 : 1024;
        int64_t *freq = PyMem_Realloc(e->freq, (size_t)cap * sizeof(int64_t));
        if (!freq) return PyErr_NoMemory(), -1;
        e->freq = freq;
        double *weight = PyMem_Realloc(e->weight, (size_t)cap * sizeof(double));
        if (!weight) return PyErr_NoMemory(), -1;
        e->weight = weight;
        e->cap_nodes = cap;
    }
    e->freq[e->n_nodes] = -1;
    e->weight[e->n_nodes] = 0.0;
    return e->n_nodes++;
}

static int32_t child_or_new(Engine *e, int32_t node, Py_UCS4 cp) {
    if ((uint64_t)(e->used + 1) * 2 > e->cap && grow_edges(e) < 0) return -1;
    uint64_t key = ((((uint64_t)node) << 21) | cp) + 1;
    uint64_t i = (key * GOLDEN) >> e->shift;
    for (;;) {
        uint64_t k = e->keys[i];
        if (k == key) return e->vals[i];
        if (k == 0) break;
        i = (i + 1) & (e->cap - 1);
    }
    int32_t made = new_node(e);
    if (made < 0) return -1;
    e->keys[i] = key;
    e->vals[i] = made;
    e->used++;
    if (node == 0 && cp < ROOT_DIRECT) e->root[cp] = made;
    return made;
}

static inline int32_t emit_index(const Engine *e, Py_UCS4 cp) {
    uint64_t key = (uint64_t)cp + 1;
    uint64_t i = (key * GOLDEN) >> e->emit_shift;
    for (;;) {
        uint64_t k = e->emit_keys[i];
        if (k == key) return e->emit_vals[i];
        if (k == 0) return -1;
        i = (i + 1) & (e->emit_cap - 1);
    }
}

/* ---------------------------------------------------------------- construction */

static int state_index(PyObject *key) {
    if (!PyUnicode_Check(key) || PyUnicode_GET_LENGTH(key) != 1) return -1;
    switch (PyUnicode_READ_CHAR(key, 0)) {
    case 'B': return ST_B;
    case 'E': return ST_E;
    case 'M': return ST_M;
    case 'S': return ST_S;
    default: return -1;
    }
}

static int read_float(PyObject *value, double *out, const char *what) {
    if (!PyFloat_Check(value)) {
        PyErr_Format(PyExc_TypeError, "%s must hold floats", what);
        return -1;
    }
    *out = PyFloat_AS_DOUBLE(value);
    return 0;
}

static int load_freq(Engine *e, PyObject *freq) {
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    if (new_node(e) < 0) return -1; /* the root */
    e->root = PyMem_Malloc(ROOT_DIRECT * sizeof(int32_t));
    if (!e->root) return PyErr_NoMemory(), -1;
    for (Py_UCS4 cp = 0; cp < ROOT_DIRECT; cp++) e->root[cp] = -1;
    while (PyDict_Next(freq, &pos, &key, &value)) {
        if (!PyUnicode_Check(key) || !PyLong_Check(value)) {
            PyErr_SetString(PyExc_TypeError, "FREQ must map str to int");
            return -1;
        }
        int overflow = 0;
        long long f = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (overflow || f < 0 || f > (1LL << 53)) {
            PyErr_SetString(PyExc_ValueError, "FREQ holds a frequency outside 0..2**53");
            return -1;
        }
        Py_ssize_t n = PyUnicode_GET_LENGTH(key);
        int kind = PyUnicode_KIND(key);
        const void *data = PyUnicode_DATA(key);
        int32_t node = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            node = child_or_new(e, node, PyUnicode_READ(kind, data, i));
            if (node < 0) return -1;
        }
        e->freq[node] = f;
        /* jieba: log(FREQ.get(word) or 1) - logtotal; only FREQ > 0 reaches it via the DAG. */
        e->weight[node] = f > 0 ? log((double)f) - e->logtotal : 0.0;
    }
    return 0;
}

static int load_hmm(Engine *e, PyObject *start_p, PyObject *trans_p, PyObject *emit_p) {
    PyObject *key, *value, *k2, *v2;
    Py_ssize_t pos = 0, pos2;
    for (int s = 0; s < 4; s++) {
        e->start[s] = e->min_float;
        for (int t = 0; t < 4; t++) e->trans[s][t] = e->min_float;
    }
    if (!PyDict_Check(start_p) || !PyDict_Check(trans_p) || !PyDict_Check(emit_p)) {
        PyErr_SetString(PyExc_TypeError, "start_p, trans_p and emit_p must be dicts");
        return -1;
    }
    int seen_start = 0;
    while (PyDict_Next(start_p, &pos, &key, &value)) {
        int s = state_index(key);
        if (s < 0) continue;
        if (read_float(value, &e->start[s], "start_p") < 0) return -1;
        seen_start |= 1 << s;
    }
    if (seen_start != 15) {
        /* jieba indexes start_p[y] without a default: a missing state is a KeyError there. */
        PyErr_SetString(PyExc_ValueError, "start_p must hold B, E, M and S");
        return -1;
    }
    pos = 0;
    while (PyDict_Next(trans_p, &pos, &key, &value)) {
        int s = state_index(key);
        if (s < 0 || !PyDict_Check(value)) continue;
        pos2 = 0;
        while (PyDict_Next(value, &pos2, &k2, &v2)) {
            int t = state_index(k2);
            if (t >= 0 && read_float(v2, &e->trans[s][t], "trans_p") < 0) return -1;
        }
    }
    /* Every character any state emits, with min_float where a state's dict lacks it. */
    Py_ssize_t total = 0;
    pos = 0;
    while (PyDict_Next(emit_p, &pos, &key, &value)) {
        if (state_index(key) < 0 || !PyDict_Check(value)) continue;
        total += PyDict_GET_SIZE(value);
    }
    e->emit_cap = 1;
    while (e->emit_cap < (uint64_t)(2 * total + 2)) e->emit_cap *= 2;
    e->emit_shift = 64 - log2_of(e->emit_cap);
    e->emit_keys = PyMem_Calloc(e->emit_cap, sizeof(uint64_t));
    e->emit_vals = PyMem_Malloc(e->emit_cap * sizeof(int32_t));
    e->emit = PyMem_Malloc((size_t)(total + 1) * sizeof(double[4]));
    if (!e->emit_keys || !e->emit_vals || !e->emit) {
        PyErr_NoMemory();
        return -1;
    }
    pos = 0;
    while (PyDict_Next(emit_p, &pos, &key, &value)) {
        int s = state_index(key);
        if (s < 0 || !PyDict_Check(value)) continue;
        pos2 = 0;
        while (PyDict_Next(value, &pos2, &k2, &v2)) {
            if (!PyUnicode_Check(k2) || PyUnicode_GET_LENGTH(k2) != 1) continue; /* never looked up */
            Py_UCS4 cp = PyUnicode_READ_CHAR(k2, 0);
            int32_t idx = emit_index(e, cp);
            if (idx < 0) {
                uint64_t ekey = (uint64_t)cp + 1;
                uint64_t i = (ekey * GOLDEN) >> e->emit_shift;
                while (e->emit_keys[i]) i = (i + 1) & (e->emit_cap - 1);
                idx = e->n_emit++;
                e->emit_keys[i] = ekey;
                e->emit_vals[i] = idx;
                for (int t = 0; t < 4; t++) e->emit[idx][t] = e->min_float;
            }
            if (read_float(v2, &e->emit[idx][s], "emit_p") < 0) return -1;
        }
    }
    return 0;
}

static int load_table(Engine *e, PyObject *table) {
    e->table = PyMem_Malloc(ROOT_DIRECT * sizeof(int32_t));
    e->replacements = PyList_New(0);
    if (!e->table || !e->replacements) return PyErr_NoMemory(), -1;
    for (Py_UCS4 cp = 0; cp < ROOT_DIRECT; cp++) e->table[cp] = -1;
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(table, &pos, &key, &value)) {
        long cp = PyLong_Check(key) ? PyLong_AsLong(key) : -1;
        if (cp < 0 || cp >= ROOT_DIRECT || !PyUnicode_Check(value)) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "table must map BMP code points to str");
            return -1;
        }
        e->table[cp] = (int32_t)PyList_GET_SIZE(e->replacements);
        if (PyList_Append(e->replacements, value) < 0) return -1;
    }
    return 0;
}

static void Engine_dealloc(Engine *e) {
    PyMem_Free(e->keys);
    PyMem_Free(e->vals);
    PyMem_Free(e->freq);
    PyMem_Free(e->weight);
    PyMem_Free(e->root);
    PyMem_Free(e->emit_keys);
    PyMem_Free(e->emit_vals);
    PyMem_Free(e->emit);
    Py_XDECREF(e->force_split);
    PyMem_Free(e->table);
    Py_XDECREF(e->replacements);
    Py_TYPE(e)->tp_free((PyObject *)e);
}

static int Engine_init(Engine *e, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"freq",      "logtotal",    "start_p", "trans_p", "emit_p",
                             "min_float", "force_split", "table",   NULL};
    PyObject *freq, *start_p, *trans_p, *emit_p, *force_split, *table = NULL;
    double logtotal, min_float;
    if (e->n_nodes) {
        PyErr_SetString(PyExc_RuntimeError, "Engine is already initialised");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!dOOOdO|O!:Engine", kwlist, &PyDict_Type,
                                     &freq, &logtotal, &start_p, &trans_p, &emit_p, &min_float,
                                     &force_split, &PyDict_Type, &table))
        return -1;
    if (!PyAnySet_Check(force_split)) {
        PyErr_SetString(PyExc_TypeError, "force_split must be a set");
        return -1;
    }
    e->logtotal = logtotal;
    e->min_float = min_float;
    if (grow_edges(e) < 0 || load_freq(e, freq) < 0) return -1;
    if (load_hmm(e, start_p, trans_p, emit_p) < 0) return -1;
    Py_INCREF(force_split);
    e->force_split = force_split;
    if (table && load_table(e, table) < 0) return -1;
    return 0;
}

/* ---------------------------------------------------------------- cutting */

typedef struct {
    PyObject *text;
    int kind;
    const void *data;
    PyObject *out;
    double *route_p;  /* calc's route[x][0] */
    int32_t *route_x; /* calc's route[x][1] */
    double *viterbi;  /* 4 per character */
    signed char *back;
    signed char *tags;
    /* tokens(): each cut word goes through memo / finish instead of straight into out */
    PyObject *memo;
    PyObject *finish;
    Py_ssize_t memo_limit;
} Cut;

#define CH(c, i) PyUnicode_READ((c)->kind, (c)->data, (i))

static inline int is_han_default(Py_UCS4 ch) {
    /* re_han_default = [\u4E00-\u9FD5a-zA-Z0-9+#&\._%\-] */
    if (ch >= 0x4E00 && ch <= 0x9FD5) return 1;
    if (ch >= 0x80) return 0;
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9'))
        return 1;
    return ch == '+' || ch == '#' || ch == '&' || ch == '.' || ch == '_' || ch == '%' ||
           ch == '-';
}

static inline int is_han(Py_UCS4 ch) { return ch >= 0x4E00 && ch <= 0x9FD5; } /* finalseg */

static inline int is_alnum(Py_UCS4 ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
}

static inline int is_digit(Py_UCS4 ch) { return ch >= '0' && ch <= '9'; }

/* A cut word to the output: as is (lcut), or as `finish` maps it (tokens: None drops it),
 * remembered in memo while it holds fewer than memo_limit words. */
static int deliver(Cut *c, PyObject *word) {
    if (!c->memo) return PyList_Append(c->out, word);
    PyObject *final = PyDict_GetItemWithError(c->memo, word); /* borrowed */
    if (final) return final == Py_None ? 0 : PyList_Append(c->out, final);
    if (PyErr_Occurred()) return -1;
    final = PyObject_CallOneArg(c->finish, word);
    if (!final) return -1;
    int rc = 0;
    if (PyDict_GET_SIZE(c->memo) < c->memo_limit) rc = PyDict_SetItem(c->memo, word, final);
    if (rc == 0 && final != Py_None) rc = PyList_Append(c->out, final);
    Py_DECREF(final);
    return rc;
}

static int put(Cut *c, Py_ssize_t start, Py_ssize_t end) {
    PyObject *word = PyUnicode_Substring(c->text, start, end);
    if (!word) return -1;
    int rc = deliver(c, word);
    Py_DECREF(word);
    return rc;
}

static int put_chars(Cut *c, Py_ssize_t start, Py_ssize_t end) {
    for (Py_ssize_t i = start; i < end; i++)
        if (put(c, i, i + 1) < 0) return -1;
    return 0;
}

/* finalseg's words go through Force_Split_Words, as finalseg.cut checks them. */
static int put_hmm_word(const Engine *e, Cut *c, Py_ssize_t start, Py_ssize_t end) {
    if (PySet_GET_SIZE(e->force_split) == 0) return put(c, start, end);
    PyObject *word = PyUnicode_Substring(c->text, start, end);
    if (!word) return -1;
    int found = PySet_Contains(e->force_split, word);
    int rc;
    if (found < 0)
        rc = -1;
    else if (found)
        rc = put_chars(c, start, end);
    else
        rc = deliver(c, word);
    Py_DECREF(word);
    return rc;
}

/* finalseg.__cut over the Han run [start, end): Viterbi over B/E/M/S, then the tag walk. */
static int viterbi_cut(const Engine *e, Cut *c, Py_ssize_t start, Py_ssize_t end) {
    Py_ssize_t n = end - start;
    double *V = c->viterbi;
    signed char *back = c->back;
    int32_t idx = emit_index(e, CH(c, start));
    for (int y = 0; y < 4; y++) V[y] = e->start[y] + (idx >= 0 ? e->emit[idx][y] : e->min_float);
    for (Py_ssize_t t = 1; t < n; t++) {
        idx = emit_index(e, CH(c, start + t));
        const double *prev = V + 4 * (t - 1);
        double *cur = V + 4 * t;
        for (int y = 0; y < 4; y++) {
            double em = idx >= 0 ? e->emit[idx][y] : e->min_float;
            int a = PREV[y][0], b = PREV[y][1];
            double pa = prev[a] + e->trans[a][y] + em;
            double pb = prev[b] + e->trans[b][y] + em;
            /* max((prob, state)): the later letter wins a tie */
            if (pb >= pa) {
                cur[y] = pb;
                back[4 * t + y] = (signed char)b;
            } else {
                cur[y] = pa;
                back[4 * t + y] = (signed char)a;
            }
        }
    }
    const double *last = V + 4 * (n - 1);
    int state = last[ST_S] >= last[ST_E] ? ST_S : ST_E; /* max over 'ES' */
    signed char *tags = c->tags;
    for (Py_ssize_t t = n - 1; t >= 0; t--) {
        tags[t] = (signed char)state;
        if (t) state = back[4 * t + state];
    }
    Py_ssize_t begin = 0, next = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        switch (tags[i]) {
        case ST_B: begin = i; break;
        case ST_E:
            if (put_hmm_word(e, c, start + begin, start + i + 1) < 0) return -1;
            next = i + 1;
            break;
        case ST_S:
            if (put_hmm_word(e, c, start + i, start + i + 1) < 0) return -1;
            next = i + 1;
            break;
        default: break;
        }
    }
    if (next < n) return put_hmm_word(e, c, start + next, end);
    return 0;
}

/* finalseg's re_skip = ([a-zA-Z0-9]+(?:\.\d+)?%?) split of a non-Han run: matches and the
 * text between them, each a word. */
static int skip_split(Cut *c, Py_ssize_t start, Py_ssize_t end) {
    Py_ssize_t pos = start, last = start;
    while (pos < end) {
        if (!is_alnum(CH(c, pos))) {
            pos++;
            continue;
        }
        Py_ssize_t stop = pos;
        while (stop < end && is_alnum(CH(c, stop))) stop++;
        if (stop + 1 < end && CH(c, stop) == '.' && is_digit(CH(c, stop + 1))) {
            stop += 2;
            while (stop < end && is_digit(CH(c, stop))) stop++;
        }
        if (stop < end && CH(c, stop) == '%') stop++;
        if (last < pos && put(c, last, pos) < 0) return -1;
        if (put(c, pos, stop) < 0) return -1;
        pos = last = stop;
    }
    if (last < end) return put(c, last, end);
    return 0;
}

/* finalseg.cut(buf) */
static int hmm_cut(const Engine *e, Cut *c, Py_ssize_t start, Py_ssize_t end) {
    Py_ssize_t i = start;
    while (i < end) {
        Py_ssize_t j = i;
        if (is_han(CH(c, i))) {
            while (j < end && is_han(CH(c, j))) j++;
            if (viterbi_cut(e, c, i, j) < 0) return -1;
        } else {
            while (j < end && !is_han(CH(c, j))) j++;
            if (skip_split(c, i, j) < 0) return -1;
        }
        i = j;
    }
    return 0;
}

/* FREQ.get(text[start:end]) or 0 */
static int64_t freq_of(const Engine *e, const Cut *c, Py_ssize_t start, Py_ssize_t end) {
    int32_t node = 0;
    for (Py_ssize_t i = start; i < end; i++) {
        node = child(e, node, CH(c, i));
        if (node < 0) return 0;
    }
    return e->freq[node] > 0 ? e->freq[node] : 0;
}

/* __cut_DAG's handling of a run of single characters: */
static int flush_buf(const Engine *e, Cut *c, Py_ssize_t start, Py_ssize_t end) {
    if (end - start == 1) return put(c, start, end);
    if (!freq_of(e, c, start, end)) return hmm_cut(e, c, start, end);
    return put_chars(c, start, end);
}

/* get_DAG + calc over the block [a, b): route[x] for x in 0..n, relative to a. */
static void calc(const Engine *e, Cut *c, Py_ssize_t a, Py_ssize_t b) {
    Py_ssize_t n = b - a;
    double *rp = c->route_p;
    int32_t *rx = c->route_x;
    rp[n] = 0.0;
    rx[n] = 0;
    for (Py_ssize_t idx = n - 1; idx >= 0; idx--) {
        int have = 0;
        double best = 0.0;
        int32_t best_x = 0;
        int32_t node = 0;
        for (Py_ssize_t x = idx; x < n; x++) {
            node = child(e, node, CH(c, a + x));
            if (node < 0 || e->freq[node] < 0) break; /* while frag in FREQ */
            if (e->freq[node] > 0) {                  /* if FREQ[frag]: DAG gets x */
                double v = e->weight[node] + rp[x + 1];
                if (!have || v >= best) { /* max((prob, x)): the larger x wins a tie */
                    best = v;
                    best_x = (int32_t)x;
                    have = 1;
                }
            }
        }
        if (!have) { /* DAG[idx] = [idx]; log(FREQ.get(char) or 1) = log(1) = 0.0 */
            best = (0.0 - e->logtotal) + rp[idx + 1];
            best_x = (int32_t)idx;
        }
        rp[idx] = best;
        rx[idx] = best_x;
    }
}

static int cut_block(const Engine *e, Cut *c, Py_ssize_t a, Py_ssize_t b, int hmm) {
    Py_ssize_t n = b - a;
    calc(e, c, a, b);
    Py_ssize_t x = 0, buf = -1; /* buf: start of the pending run, -1 when empty */
    while (x < n) {
        Py_ssize_t y = c->route_x[x] + 1;
        if (hmm) { /* __cut_DAG */
            if (y - x == 1) {
                if (buf < 0) buf = x;
            } else {
                if (buf >= 0 && flush_buf(e, c, a + buf, a + x) < 0) return -1;
                buf = -1;
                if (put(c, a + x, a + y) < 0) return -1;
            }
        } else { /* __cut_DAG_NO_HMM: re_eng = [a-zA-Z0-9], single characters joined */
            if (y - x == 1 && is_alnum(CH(c, a + x))) {
                if (buf < 0) buf = x;
            } else {
                if (buf >= 0 && put(c, a + buf, a + x) < 0) return -1;
                buf = -1;
                if (put(c, a + x, a + y) < 0) return -1;
            }
        }
        x = y;
    }
    if (buf >= 0) {
        if (hmm) return flush_buf(e, c, a + buf, a + n);
        return put(c, a + buf, a + n);
    }
    return 0;
}

static PyObject *run_cut(Engine *e, PyObject *text, int hmm, PyObject *memo, PyObject *finish,
                         Py_ssize_t memo_limit) {
    if (!e->n_nodes) {
        PyErr_SetString(PyExc_RuntimeError, "Engine is not initialised");
        return NULL;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    Cut c = {text, PyUnicode_KIND(text), PyUnicode_DATA(text), PyList_New(0),
             NULL, NULL, NULL, NULL, NULL, memo, finish, memo_limit};
    if (!c.out) return NULL;
    if (n == 0) return c.out;
    /* one block for all scratch arrays: route (n + 1), Viterbi (4 n), tags (n) */
    size_t bytes = (size_t)(n + 1) * (sizeof(double) + sizeof(int32_t)) +
                   (size_t)n * 4 * (sizeof(double) + 1) + (size_t)n + 16;
    char *scratch = PyMem_Malloc(bytes);
    if (!scratch) {
        Py_DECREF(c.out);
        return PyErr_NoMemory();
    }
    c.route_p = (double *)scratch;
    c.viterbi = c.route_p + (n + 1);
    c.route_x = (int32_t *)(c.viterbi + 4 * n);
    c.back = (signed char *)(c.route_x + (n + 1));
    c.tags = c.back + 4 * n;
    Py_ssize_t i = 0;
    int rc = 0;
    while (i < n && rc == 0) {
        Py_UCS4 ch = CH(&c, i);
        if (is_han_default(ch)) {
            Py_ssize_t j = i + 1;
            while (j < n && is_han_default(CH(&c, j))) j++;
            rc = cut_block(e, &c, i, j, hmm);
            i = j;
        } else if (ch == '\r' && i + 1 < n && CH(&c, i + 1) == '\n') {
            rc = put(&c, i, i + 2); /* re_skip_default: \r\n is one token */
            i += 2;
        } else {
            rc = put(&c, i, i + 1); /* whitespace or any other character: one token each */
            i++;
        }
    }
    PyMem_Free(scratch);
    if (rc < 0) {
        Py_DECREF(c.out);
        return NULL;
    }
    return c.out;
}

static PyObject *Engine_lcut(Engine *e, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"text", "hmm", NULL};
    PyObject *text;
    int hmm = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "U|p:lcut", kwlist, &text, &hmm)) return NULL;
    return run_cut(e, text, hmm, NULL, NULL, 0);
}

static PyObject *Engine_tokens(Engine *e, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"text", "hmm", "memo", "finish", "memo_limit", NULL};
    PyObject *text, *memo, *finish;
    int hmm;
    Py_ssize_t memo_limit;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "UpO!On:tokens", kwlist, &text, &hmm,
                                     &PyDict_Type, &memo, &finish, &memo_limit))
        return NULL;
    if (!PyCallable_Check(finish)) {
        PyErr_SetString(PyExc_TypeError, "finish must be callable");
        return NULL;
    }
    return run_cut(e, text, hmm, memo, finish, memo_limit);
}

/* Each character the table maps replaced by its string (the table: a code point -> str dict
 * turned into an array over the BMP at init); the text itself when none is in it. */
static PyObject *Engine_translate(Engine *e, PyObject *text) {
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "text must be a str");
        return NULL;
    }
    if (!e->table) {
        PyErr_SetString(PyExc_RuntimeError, "Engine has no translation table");
        return NULL;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), i = 0;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    if (kind == PyUnicode_1BYTE_KIND && PyUnicode_IS_ASCII(text)) return Py_NewRef(text);
    for (; i < n; i++) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, i);
        if (ch < ROOT_DIRECT && e->table[ch] >= 0) break;
    }
    if (i == n) return Py_NewRef(text);
    Py_ssize_t length = 0; /* of the result: a first pass, then a UCS4 buffer */
    for (Py_ssize_t j = 0; j < n; j++) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, j);
        int32_t k = ch < ROOT_DIRECT ? e->table[ch] : -1;
        length += k >= 0 ? PyUnicode_GET_LENGTH(PyList_GET_ITEM(e->replacements, k)) : 1;
    }
    Py_UCS4 *buf = PyMem_Malloc((size_t)(length ? length : 1) * sizeof(Py_UCS4));
    if (!buf) return PyErr_NoMemory();
    Py_ssize_t at = 0;
    for (Py_ssize_t j = 0; j < n; j++) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, j);
        int32_t k = ch < ROOT_DIRECT ? e->table[ch] : -1;
        if (k < 0) {
            buf[at++] = ch;
            continue;
        }
        PyObject *with = PyList_GET_ITEM(e->replacements, k);
        Py_ssize_t m = PyUnicode_GET_LENGTH(with);
        for (Py_ssize_t r = 0; r < m; r++) buf[at++] = PyUnicode_READ_CHAR(with, r);
    }
    PyObject *result = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, buf, length);
    PyMem_Free(buf);
    return result;
}

static PyObject *Engine_freq(Engine *e, PyObject *arg) {
    /* FREQ.get(word) as the trie holds it (None when absent): for tests of the snapshot. */
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "word must be a str");
        return NULL;
    }
    int32_t node = 0;
    Py_ssize_t n = PyUnicode_GET_LENGTH(arg);
    for (Py_ssize_t i = 0; i < n && node >= 0; i++) node = child(e, node, PyUnicode_READ_CHAR(arg, i));
    if (node < 0 || !e->n_nodes || e->freq[node] < 0) Py_RETURN_NONE;
    return PyLong_FromLongLong(e->freq[node]);
}

static PyObject *Engine_nodes(Engine *e, void *closure) {
    (void)closure;
    return PyLong_FromLong(e->n_nodes);
}

static PyMethodDef Engine_methods[] = {
    {"lcut", (PyCFunction)(void (*)(void))Engine_lcut, METH_VARARGS | METH_KEYWORDS,
     "lcut(text, hmm=True) -> list[str]: jieba.Tokenizer.lcut(text, HMM=hmm)."},
    {"tokens", (PyCFunction)(void (*)(void))Engine_tokens, METH_VARARGS | METH_KEYWORDS,
     "tokens(text, hmm, memo, finish, memo_limit) -> list: lcut's words mapped by "
     "memo.get(word) or finish(word) (kept in memo while it is under memo_limit), None "
     "dropped."},
    {"translate", (PyCFunction)Engine_translate, METH_O,
     "translate(text) -> str: the table's characters replaced (the text when none occurs)."},
    {"freq", (PyCFunction)Engine_freq, METH_O, "freq(word) -> int | None: FREQ.get(word)."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Engine_getset[] = {
    {"nodes", (getter)Engine_nodes, NULL, "trie nodes (distinct prefixes, the root included)",
     NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject EngineType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "retrieval_bench.segment._dagcut.Engine",
    .tp_basicsize = sizeof(Engine),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A snapshot of a jieba.Tokenizer's dictionary and finalseg's HMM, cutting as "
              "jieba 0.42.1's accurate mode does.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Engine_init,
    .tp_dealloc = (destructor)Engine_dealloc,
    .tp_methods = Engine_methods,
    .tp_getset = Engine_getset,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_dagcut",
                                    "jieba 0.42.1's accurate-mode cut, compiled.", -1, NULL};

PyMODINIT_FUNC PyInit__dagcut(void) {
    if (PyType_Ready(&EngineType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&EngineType);
    if (PyModule_AddObject(m, "Engine", (PyObject *)&EngineType) < 0) {
        Py_DECREF(&EngineType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
