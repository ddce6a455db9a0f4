"""`tf.train.Example` records written and read without TensorFlow or TFDS.

The built datasets (data/build/layout.py) are ArrayRecord files of serialized
`tf.train.Example` protos, the format TFDS writes and reads, so that
`tfds.builder_from_directory` serves them to users. The training process must
not import TensorFlow, so the message classes are made here from the public
schema (tensorflow/core/example/{example,feature}.proto) in a descriptor pool
of their own, which cannot clash with TensorFlow's when both are loaded.

A record is a flat dict {feature name: bytes | str | int | list of one kind};
`decode` gives back {name: list of bytes or ints}.
"""

import functools

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_PACKAGE = "xm3600.records"


def _schema():
    """The FileDescriptorProto of BytesList, Int64List, FloatList, Feature, Features, Example."""
    F = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="xm3600_records_example.proto",
                                               package=_PACKAGE, syntax="proto3")

    def message(name, fields, nested=()):
        m = proto.message_type.add(name=name)
        for field in fields:
            m.field.add(**field)
        for sub in nested:
            m.nested_type.add().CopyFrom(sub)
        return m

    def repeated(type_):
        return dict(name="value", number=1, label=F.LABEL_REPEATED, type=type_)

    message("BytesList", [repeated(F.TYPE_BYTES)])
    message("FloatList", [repeated(F.TYPE_FLOAT)])
    message("Int64List", [repeated(F.TYPE_INT64)])
    feature = message("Feature", [
        dict(name=name, number=number, label=F.LABEL_OPTIONAL, type=F.TYPE_MESSAGE,
             type_name=f".{_PACKAGE}.{kind}", oneof_index=0)
        for number, (name, kind) in enumerate(
            (("bytes_list", "BytesList"), ("float_list", "FloatList"),
             ("int64_list", "Int64List")), start=1)])
    feature.oneof_decl.add(name="kind")
    entry = descriptor_pb2.DescriptorProto(name="FeatureEntry")
    entry.field.add(name="key", number=1, label=F.LABEL_OPTIONAL, type=F.TYPE_STRING)
    entry.field.add(name="value", number=2, label=F.LABEL_OPTIONAL, type=F.TYPE_MESSAGE,
                    type_name=f".{_PACKAGE}.Feature")
    entry.options.map_entry = True
    message("Features", [dict(name="feature", number=1, label=F.LABEL_REPEATED,
                              type=F.TYPE_MESSAGE, type_name=f".{_PACKAGE}.Features.FeatureEntry")],
            nested=[entry])
    message("Example", [dict(name="features", number=1, label=F.LABEL_OPTIONAL,
                             type=F.TYPE_MESSAGE, type_name=f".{_PACKAGE}.Features")])
    return proto


@functools.cache
def _example_class():
    pool = descriptor_pool.DescriptorPool()
    pool.Add(_schema())
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.Example"))


def encode(record):
    """Serializes {name: bytes | str | int | list of one of them} as a tf.train.Example."""
    example = _example_class()()
    features = example.features.feature
    for name, value in record.items():
        values = value if isinstance(value, (list, tuple)) else [value]
        # One type per feature (protobuf rejects a value of another kind in the list).
        kind = {type(v) for v in values}
        if kind <= {str}:
            features[name].bytes_list.value.extend(v.encode("utf-8") for v in values)
        elif kind == {bytes}:
            features[name].bytes_list.value.extend(values)
        elif kind == {int}:
            features[name].int64_list.value.extend(values)
        else:
            raise TypeError(f"feature {name!r}: expected bytes, str or int values, got "
                            f"{value!r:.80}")
    return example.SerializeToString(deterministic=True)


def decode(data):
    """{name: list of bytes (bytes_list) or of ints (int64_list)} of a serialized Example."""
    example = _example_class().FromString(data)
    out = {}
    for name, feature in example.features.feature.items():
        kind = feature.WhichOneof("kind")
        out[name] = list(getattr(feature, kind).value) if kind else []
    return out
