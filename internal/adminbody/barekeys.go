package adminbody

import "encoding/json"

// UnmarshalFastjson is json.Unmarshal for a body a Java process wrote
// with fastjson: one that encoding/json refuses is read again with its
// bare integer keys quoted (QuoteBareKeys): a Java name server's
// ClusterInfo holds a Map<Long, String> of broker ids, a static topic's
// mapping a Map<Integer, Integer>, which fastjson writes {0:...}.
func UnmarshalFastjson(data []byte, v any) error {
	err := json.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	if quoted := QuoteBareKeys(data); len(quoted) != len(data) {
		return json.Unmarshal(quoted, v)
	}
	return err
}

// QuoteBareKeys returns data with the integer object keys fastjson writes
// bare ({0:5,1:7}, a Map<Integer, ...>) quoted ({"0":5,"1":7}), so that
// encoding/json can read a Java body holding such a map; anything else is
// copied as it is. data itself is returned when it has no bare key. It
// never fails: input that is not JSON stays input encoding/json refuses.
//
//	{"currIdMap":{0:0,1:1},"list":[0,1]}  ->  {"currIdMap":{"0":0,"1":1},"list":[0,1]}
//	              ^   ^ keys: quoted              array values: kept ^ ^
func QuoteBareKeys(data []byte) []byte {
	var (
		out       []byte // nil until the first key is quoted
		copied    int    // data[:copied] is in out
		objects   []bool // per open container: an object (true) or an array
		expectKey bool   // the next token is in key position
	)
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case ' ', '\t', '\n', '\r':
			continue
		case '"':
			for i++; i < len(data) && data[i] != '"'; i++ {
				if data[i] == '\\' {
					i++
				}
			}
			expectKey = false
		case '{', '[':
			objects = append(objects, c == '{')
			expectKey = c == '{'
		case '}', ']':
			if len(objects) > 0 {
				objects = objects[:len(objects)-1]
			}
			expectKey = false
		case ',':
			expectKey = len(objects) > 0 && objects[len(objects)-1]
		default:
			if expectKey && (c == '-' || '0' <= c && c <= '9') {
				end := i + 1
				for end < len(data) && '0' <= data[end] && data[end] <= '9' {
					end++
				}
				out = append(out, data[copied:i]...)
				out = append(out, '"')
				out = append(out, data[i:end]...)
				out = append(out, '"')
				copied, i = end, end-1
			}
			expectKey = false
		}
	}
	if out == nil {
		return data
	}
	return append(out, data[copied:]...)
}
