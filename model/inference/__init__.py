"""Running a trained model: the decoding options (options.py) and the engine that decodes greedily, by
beam or by sampling over a key/value cache (decoding.py); the pipeline pages and tools call
(pipeline.py: text in, translation and its trace out); the residual stream (stream.py); ensembles
(ensemble.py); the confidence notice (confidence.py)."""
