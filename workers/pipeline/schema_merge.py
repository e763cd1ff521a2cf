"""One Spark type for a column whose files disagree on it, and each file's values
turned into that type.

A lake's files hold the columns of the schema version they were archived under.
Spark merges schemas that only add fields; a column that another version gives
another Spark type (a JSON-text string that became a struct, a map that became
a struct, an integer that became a string) it cannot merge. ``common_type``
decides such a column's type at the deepest level where the files disagree, so
the rest of a struct stays typed:

- structs: the fields of both, each merged (fields only one has are null in
  the other's rows); arrays and maps: their values merged;
- ``long`` and ``double``: ``double``, as Spark's own type coercion widens them;
- any other disagreement: ``string``. Strings stay as they are (a JSON-text
  column's values were JSON text already), numbers and booleans become their
  text, structs, arrays and maps their JSON text (Spark's ``to_json``): every
  value has a string form, and JSON text is how the data source holds what
  one Spark type cannot.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DataType,
    DoubleType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

_NUMBERS = (LongType(), DoubleType())


def common_type(left: DataType, right: DataType) -> DataType:
    """The type that values of both types convert to (see the module's rules)."""
    if left == right:
        return left
    if isinstance(left, StructType) and isinstance(right, StructType):
        return merge_structs([left, right])
    if isinstance(left, ArrayType) and isinstance(right, ArrayType):
        return ArrayType(common_type(left.elementType, right.elementType),
                         left.containsNull or right.containsNull)
    if isinstance(left, MapType) and isinstance(right, MapType) \
            and left.keyType == right.keyType:
        return MapType(left.keyType, common_type(left.valueType, right.valueType),
                       left.valueContainsNull or right.valueContainsNull)
    if left in _NUMBERS and right in _NUMBERS:
        return DoubleType()
    return StringType()


def merge_structs(structs: list[StructType]) -> StructType:
    """The fields of all structs, in the order they first appear, each of the common
    type of its occurrences; every field nullable, as rows of some structs lack it."""
    merged: dict[str, DataType] = {}
    for struct in structs:
        for field in struct.fields:
            known = merged.get(field.name)
            merged[field.name] = field.dataType if known is None \
                else common_type(known, field.dataType)
    return StructType([StructField(name, kind, True) for name, kind in merged.items()])


def conform(column: Column, have: DataType | None, want: DataType) -> Column:
    """``column``, of type ``have`` (None: the file has no such column), as ``want``,
    a type ``common_type`` made from ``have``. Equal types are left untouched."""
    if have is None:
        return F.lit(None).cast(want)
    if have == want:
        return column
    if isinstance(want, StructType) and isinstance(have, StructType):
        present = {field.name: field.dataType for field in have.fields}
        fields = [conform(column.getField(field.name), present.get(field.name),
                          field.dataType).alias(field.name) for field in want.fields]
        return F.when(column.isNotNull(), F.struct(*fields))
    if isinstance(want, ArrayType) and isinstance(have, ArrayType):
        return F.transform(column, lambda item: conform(item, have.elementType,
                                                        want.elementType))
    if isinstance(want, MapType) and isinstance(have, MapType):
        return F.transform_values(column, lambda _, value: conform(value, have.valueType,
                                                                   want.valueType))
    if isinstance(want, StringType) and isinstance(have, StructType | ArrayType | MapType):
        return F.to_json(column)
    return column.cast(want)
