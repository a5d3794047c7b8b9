"""TensorFlow's on-disk formats (TFRecord files, SSTables, tensor bundles) in plain Python."""
