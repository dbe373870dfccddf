// A tiny runtime schema language: each wire type is written once, as a validator, and its
// TypeScript type is inferred from it (`Infer<typeof X>`). The tests validate what the Rust
// server really sends (golden streams of every scenario and live runs) against these
// validators strictly (unknown fields are errors), so the types cannot drift from the Rust
// types unnoticed.
//
// The client itself only imports the *types*; the validators cost nothing at run time unless a
// program imports them (`import { AgentEventSchema, validate } from "@weft/client/schema"`).
function typeName(value) {
    if (value === null)
        return "null";
    if (Array.isArray(value))
        return "array";
    return typeof value;
}
function primitive(name, test) {
    return {
        describe: name,
        check(value, path, errors) {
            if (!test(value))
                errors.push(`${path}: expected ${name}, got ${typeName(value)}`);
        },
    };
}
export const str = primitive("string", (v) => typeof v === "string");
export const num = primitive("number", (v) => typeof v === "number" && Number.isFinite(v));
/** A non-negative integer (Rust `u32`/`u64`). */
export const int = primitive("integer", (v) => typeof v === "number" && Number.isInteger(v) && v >= 0);
export const bool = primitive("boolean", (v) => typeof v === "boolean");
/** Any JSON value (`serde_json::Value`). */
export const json = { describe: "JSON", check() { } };
export function lit(value) {
    return primitive(JSON.stringify(value), (v) => v === value);
}
export function oneOf(...values) {
    return primitive(values.map((v) => JSON.stringify(v)).join(" | "), (v) => values.includes(v));
}
export function opt(schema) {
    return { optional: schema };
}
export function arr(item) {
    return {
        describe: `${item.describe}[]`,
        check(value, path, errors, strict) {
            if (!Array.isArray(value)) {
                errors.push(`${path}: expected array, got ${typeName(value)}`);
                return;
            }
            value.forEach((v, i) => item.check(v, `${path}[${i}]`, errors, strict));
        },
    };
}
export function obj(shape) {
    return {
        shape,
        describe: `{${Object.keys(shape).join(", ")}}`,
        check(value, path, errors, strict) {
            if (typeof value !== "object" || value === null || Array.isArray(value)) {
                errors.push(`${path}: expected object, got ${typeName(value)}`);
                return;
            }
            const record = value;
            for (const [key, field] of Object.entries(shape)) {
                const optional = "optional" in field;
                const schema = optional ? field.optional : field;
                if (!(key in record) || record[key] === undefined) {
                    if (!optional)
                        errors.push(`${path}.${key}: missing`);
                    continue;
                }
                schema.check(record[key], `${path}.${key}`, errors, strict);
            }
            if (strict) {
                for (const key of Object.keys(record)) {
                    if (!(key in shape))
                        errors.push(`${path}.${key}: unknown field`);
                }
            }
        },
    };
}
/**
 * A union of objects told apart by the string field `tag`; members that share a `tag` value
 * are told apart by the string field `sub` (Weft's `{"type": "progress", "kind": …}`).
 */
export function tagged(tag, members, sub) {
    const valueOf = (member, key) => {
        const field = member.shape[key];
        return field === undefined ? undefined : JSON.parse(field.describe);
    };
    const byTag = new Map();
    for (const member of members) {
        const t = valueOf(member, tag);
        byTag.set(t, [...(byTag.get(t) ?? []), member]);
    }
    const subTags = {};
    for (const [t, group] of byTag) {
        if (group.length > 1) {
            if (sub === undefined)
                throw new Error(`tagged: ${tag} ${t} is shared and no sub tag tells its members apart`);
            subTags[t] = group.map((m) => valueOf(m, sub) ?? "");
        }
    }
    return {
        tags: [...byTag.keys()],
        subTags,
        describe: `one of ${[...byTag.keys()].join(", ")} by ${tag}`,
        check(value, path, errors, strict) {
            const record = typeof value === "object" && value !== null ? value : undefined;
            const t = record?.[tag];
            const group = typeof t === "string" ? byTag.get(t) : undefined;
            if (!group) {
                errors.push(`${path}.${tag}: unknown ${tag} ${JSON.stringify(t)}`);
                return;
            }
            let member = group[0];
            if (group.length > 1 && sub !== undefined) {
                const s = record?.[sub];
                member = group.find((m) => valueOf(m, sub) === s);
                if (!member) {
                    errors.push(`${path}.${sub}: unknown ${sub} ${JSON.stringify(s)} of ${tag} ${JSON.stringify(t)}`);
                    return;
                }
            }
            member?.check(value, path, errors, strict);
        },
    };
}
/** What is wrong with `value` as a `T` (empty: nothing). Strict: unknown fields are errors. */
export function problems(schema, value, strict = true) {
    const errors = [];
    schema.check(value, "$", errors, strict);
    return errors;
}
/** `value` as a `T`, or an error listing what is wrong. */
export function validate(schema, value, strict = false) {
    const errors = problems(schema, value, strict);
    if (errors.length > 0)
        throw new TypeError(`invalid ${schema.describe}: ${errors.join("; ")}`);
    return value;
}
