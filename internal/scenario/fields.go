package scenario

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
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
		return nil // a leaf with its own syntax (durations)
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
	}
	return nil
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
