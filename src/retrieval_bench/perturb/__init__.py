"""Perturbed evaluation sets: each query rewritten as Chinese queries really arrive (traditional
characters, pinyin-input homophones, full-width forms, romanised entity names, spaces at word
boundaries or none, cut short), each kind through a well-kept library (OpenCC, pypinyin, jieba,
the Unicode database), deterministic for a seed, and linked to its original by
`meta.perturbed_from` and `meta.perturbation`, so a job scores every variant against its
original (`scoring.robustness`)."""
