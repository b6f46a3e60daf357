"""A model on disk and beyond: checkpoint directories (checkpoint.py), the model card (card.py), where
checkpoints live (places.py), Marian / OPUS-MT conversion (convert.py) and the Hugging Face hub (hub.py)."""
