"""The network as in the paper's figure: its configuration (config.py), the one mask convention (masks.py),
embeddings, positional encoding, attention and the encoder and decoder layers (layers.py), the
Transformer itself (transformer.py), the subword tokenizer (tokenizer.py), a padded batch of token ids
(batch.py), the three attention kinds (kinds.py), and the trace its layers write when asked (trace/, with
the names of everything it records in names.py): the trace is passed in, never kept on a module."""
