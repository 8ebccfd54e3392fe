"""Text for the lexical arms and the query parser: the tokeniser (jieba with the dataset's entity
lexicon, NFKC, ASCII lowercase) and the on-disk cache of a tokenised corpus."""
