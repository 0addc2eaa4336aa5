"""Bytes to records, knowing no log format: protobuf wire, TFRecord framing, the LevelDB log,
CRC-32/32C, whole-file reading and string columns from buffers.
"""
