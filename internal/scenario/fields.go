package scenario

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
)

// checkUnknownFields walks the decoded document against the Go type and
// reports the first field the type does not have, by its full path
// (e.g. cluster.nodez, workload.statefulSets[1].replica). Strict decoders
// report only the bare field name, which is useless in a large file.
func checkUnknownFields(doc any, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		return checkLeaf(doc, t, path) // a leaf with its own syntax (durations)
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := doc.(map[string]any)
		if !ok {
			return nil // wrong type: the decoder reports it
		}
		fields := jsonFields(t)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ft, ok := fields[k]
			if !ok {
				return fmt.Errorf("%s: unknown field (known: %s)", join(path, k), strings.Join(sortedKeys(fields), ", "))
			}
			if err := checkUnknownFields(m[k], ft, join(path, k)); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		items, ok := doc.([]any)
		if !ok {
			return nil
		}
		for i, item := range items {
			if err := checkUnknownFields(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		m, ok := doc.(map[string]any)
		if !ok {
			return nil
		}
		for k, v := range m {
			if err := checkUnknownFields(v, t.Elem(), join(path, k)); err != nil {
				return err
			}
		}
	default:
		return checkLeaf(doc, t, path)
	}
	return nil
}

// checkLeaf decodes one value into its Go type, so that a wrong value is
// reported with its full path (churn.cycleTimeout: want a duration such as
// "30s", got 5) rather than by the strict decoder's Go names.
func checkLeaf(doc any, t reflect.Type, path string) error {
	if doc == nil {
		return nil
	}
	data, err := json.Marshal(doc)
	if err != nil {
		return nil // the decoder reports it
	}
	if err := json.Unmarshal(data, reflect.New(t).Interface()); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return fmt.Errorf("%s: %s is not %s", path, data, kindName(t))
		}
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// kindName says what a field of type t takes, for errors.
func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	}
	return "a " + t.String()
}

func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func sortedKeys(m map[string]reflect.Type) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// atLine prefixes err with the line of the field its message starts with
// ("churn.cycles: ..." becomes "line 12: churn.cycles: ..."), found in the
// YAML source; err is returned as it is when no line is found.
func atLine(data []byte, err error) error {
	path, _, ok := strings.Cut(err.Error(), ": ")
	if !ok || strings.ContainsAny(path, " \n") {
		return err
	}
	if line := lineOf(data, path); line > 0 {
		return fmt.Errorf("line %d: %w", line, err)
	}
	return err
}

// lineOf is the line of the value at path (a.b[2].c) in the YAML source,
// or 0 when the source does not have it.
func lineOf(data []byte, path string) int {
	var root yamlv3.Node
	if yamlv3.Unmarshal(data, &root) != nil || len(root.Content) == 0 {
		return 0
	}
	n := root.Content[0]
	line := 0
	for _, seg := range strings.Split(path, ".") {
		key, rest, _ := strings.Cut(seg, "[")
		if key != "" {
			if n.Kind != yamlv3.MappingNode {
				return line
			}
			found := false
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == key {
					line, n, found = n.Content[i].Line, n.Content[i+1], true
					break
				}
			}
			if !found {
				return line
			}
		}
		for rest != "" {
			idx, after, _ := strings.Cut(rest, "]")
			rest = strings.TrimPrefix(after, "[")
			i, err := strconv.Atoi(idx)
			if err != nil || n.Kind != yamlv3.SequenceNode || i < 0 || i >= len(n.Content) {
				return line
			}
			n = n.Content[i]
			line = n.Line
		}
	}
	return line
}
