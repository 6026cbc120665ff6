package apps

// Value types of the DSL, as app definitions write them: start variables,
// conversation variables, code node outputs, default values. Packages
// that check values (workflow, conversations) use these names.
const (
	TypeString       = "string"
	TypeSecret       = "secret" // a string the console masks
	TypeNumber       = "number"
	TypeInteger      = "integer"
	TypeFloat        = "float"
	TypeBoolean      = "boolean"
	TypeObject       = "object"
	TypeFile         = "file"
	TypeArrayString  = "array[string]"
	TypeArrayNumber  = "array[number]"
	TypeArrayBoolean = "array[boolean]"
	TypeArrayObject  = "array[object]"
	TypeArrayFile    = "array[file]"
	TypeArrayAny     = "array[any]"
	TypeNone         = "none"
)
