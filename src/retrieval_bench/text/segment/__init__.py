"""Exact, compiled jieba segmentation (`text.impl=fast`) and its parity check against jieba."""
