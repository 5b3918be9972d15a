package mongo

import (
	"encoding/binary"
	"errors"
)

// storageBSONEngine reads the storage engine from a data directory's
// storage.bson, the document mongod writes on first start:
// {storage: {engine: "wiredTiger", options: {...}}}. mongod uses it when no
// engine is configured and refuses to start when the configured one
// differs, so it is the engine the data really is in.
func storageBSONEngine(b []byte) (string, error) {
	storage, err := bsonField(b, "storage", 0x03)
	if err != nil {
		return "", err
	}
	eng, err := bsonField(storage, "engine", 0x02)
	if err != nil {
		return "", err
	}
	// A BSON string is int32 length (with the NUL), bytes, NUL.
	if len(eng) < 5 {
		return "", errBSON
	}
	n := int(binary.LittleEndian.Uint32(eng))
	if n < 1 || 4+n > len(eng) {
		return "", errBSON
	}
	return string(eng[4 : 4+n-1]), nil
}

var errBSON = errors.New("not a storage.bson document")

// bsonField returns the raw value of a top-level field of a BSON document,
// if it has the wanted type.
func bsonField(doc []byte, name string, want byte) ([]byte, error) {
	if len(doc) < 5 {
		return nil, errBSON
	}
	size := int(binary.LittleEndian.Uint32(doc))
	if size < 5 || size > len(doc) {
		return nil, errBSON
	}
	doc = doc[4 : size-1]
	for len(doc) > 0 {
		typ := doc[0]
		doc = doc[1:]
		end := 0
		for end < len(doc) && doc[end] != 0 {
			end++
		}
		if end == len(doc) {
			return nil, errBSON
		}
		key := string(doc[:end])
		doc = doc[end+1:]
		n, err := bsonValueLen(typ, doc)
		if err != nil {
			return nil, err
		}
		if key == name {
			if typ != want {
				return nil, errBSON
			}
			return doc[:n], nil
		}
		doc = doc[n:]
	}
	return nil, errBSON
}

// bsonValueLen is the encoded length of a value of the given type.
func bsonValueLen(typ byte, b []byte) (int, error) {
	fixed := map[byte]int{0x01: 8, 0x07: 12, 0x08: 1, 0x09: 8, 0x0A: 0, 0x10: 4, 0x11: 8, 0x12: 8, 0x13: 16, 0xFF: 0, 0x7F: 0}
	if n, ok := fixed[typ]; ok {
		if n > len(b) {
			return 0, errBSON
		}
		return n, nil
	}
	if len(b) < 4 {
		return 0, errBSON
	}
	n := int(binary.LittleEndian.Uint32(b))
	switch typ {
	case 0x02, 0x0D, 0x0E: // string, JavaScript, symbol
		n += 4
	case 0x03, 0x04: // document, array: the length includes itself
	case 0x05: // binary: length, subtype, bytes
		n += 5
	default:
		return 0, errBSON
	}
	if n < 0 || n > len(b) {
		return 0, errBSON
	}
	return n, nil
}
