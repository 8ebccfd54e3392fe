/* Read-only or writable C-contiguous views of the arrays the extensions are handed (numpy
 * arrays through the buffer protocol, so no extension needs numpy's headers to build). */
#ifndef RETRIEVAL_BENCH_BUFFERS_H
#define RETRIEVAL_BENCH_BUFFERS_H

#include <Python.h>

typedef struct {
    Py_buffer view;
    int held;
} Buf;

/* The buffer of obj, with items of itemsize bytes; -1 with an exception set otherwise. */
static int get(PyObject *obj, Buf *b, int writable, const char *what, Py_ssize_t itemsize) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &b->view, flags) < 0) return -1;
    b->held = 1;
    if (b->view.itemsize != itemsize) {
        PyErr_Format(PyExc_TypeError, "%s: %zd-byte items are needed", what, itemsize);
        return -1;
    }
    return 0;
}

static void release(Buf *b) {
    if (b->held) PyBuffer_Release(&b->view);
}

#endif
