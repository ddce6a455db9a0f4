"""`tf.train.Example` records written and read without TensorFlow or TFDS.

The builds are ArrayRecord files of serialized `tf.train.Example` protos (what TFDS reads,
so `tfds.builder_from_directory` serves them). The trainer must not import TensorFlow, so
the message classes are made here from the public schema in a descriptor pool of their own
(no clash with TensorFlow's). A record is {feature name: int | bytes | list of bytes};
`decode` gives back {name: list of bytes or ints}.
"""

import functools

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format

# tf.train.Example's schema, less Feature's float_list (field 2): no feature here is a float.
_SCHEMA = """
name: "xm3600_records_example.proto" package: "xm3600.records" syntax: "proto3"
message_type { name: "BytesList"
               field { name: "value" number: 1 label: LABEL_REPEATED type: TYPE_BYTES } }
message_type { name: "Int64List"
               field { name: "value" number: 1 label: LABEL_REPEATED type: TYPE_INT64 } }
message_type {
  name: "Feature" oneof_decl { name: "kind" }
  field { name: "bytes_list" number: 1 type_name: ".xm3600.records.BytesList" oneof_index: 0
          label: LABEL_OPTIONAL type: TYPE_MESSAGE }
  field { name: "int64_list" number: 3 type_name: ".xm3600.records.Int64List" oneof_index: 0
          label: LABEL_OPTIONAL type: TYPE_MESSAGE } }
message_type {
  name: "Features"
  field { name: "feature" number: 1 type_name: ".xm3600.records.Features.FeatureEntry"
          label: LABEL_REPEATED type: TYPE_MESSAGE }
  nested_type { name: "FeatureEntry" options { map_entry: true }
                field { name: "key" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING }
                field { name: "value" number: 2 type_name: ".xm3600.records.Feature"
                        label: LABEL_OPTIONAL type: TYPE_MESSAGE } } }
message_type { name: "Example"
               field { name: "features" number: 1 type_name: ".xm3600.records.Features"
                       label: LABEL_OPTIONAL type: TYPE_MESSAGE } }
"""


@functools.cache
def _example_class():
    pool = descriptor_pool.DescriptorPool()
    pool.Add(text_format.Parse(_SCHEMA, descriptor_pb2.FileDescriptorProto()))
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("xm3600.records.Example"))


def encode(record):
    """Serializes {name: int | bytes | list of bytes} as a tf.train.Example (protobuf raises
    TypeError for another value)."""
    example = _example_class()()
    for name, value in record.items():
        feature = example.features.feature[name]
        if isinstance(value, int):
            feature.int64_list.value.append(value)
        else:
            feature.bytes_list.value.extend(value if isinstance(value, list) else [value])
    return example.SerializeToString(deterministic=True)


def decode(data):
    """{name: list of bytes (bytes_list) or of ints (int64_list)} of a serialized Example."""
    features = _example_class().FromString(data).features.feature
    return {name: list(getattr(feature, kind).value) if (kind := feature.WhichOneof("kind")) else []
            for name, feature in features.items()}
