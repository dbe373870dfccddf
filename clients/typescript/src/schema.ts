// A tiny runtime schema language: each wire type is written once, as a validator, and its
// TypeScript type is inferred from it (`Infer<typeof X>`). The tests validate what the Rust
// server really sends (golden streams of every scenario and live runs) against these
// validators strictly (unknown fields are errors), so the types cannot drift from the Rust
// types unnoticed.
//
// The client itself only imports the *types*; the validators cost nothing at run time unless a
// program imports them (`import { AgentEventSchema, validate } from "@weft/client/schema"`).

/** A validator of `T`: `check` appends what is wrong to `errors`. */
export interface Schema<T> {
  readonly describe: string;
  check(value: unknown, path: string, errors: string[], strict: boolean): void;
  /** Phantom: the type this schema describes. */
  readonly __type?: T;
}

/** A property that may be missing. */
export interface Optional<T> {
  readonly optional: Schema<T>;
}

export type Infer<S> = S extends Schema<infer T> ? T : never;

type Shape = Record<string, Schema<unknown> | Optional<unknown>>;
type RequiredKeys<S extends Shape> = { [K in keyof S]: S[K] extends Optional<unknown> ? never : K }[keyof S];
type OptionalKeys<S extends Shape> = { [K in keyof S]: S[K] extends Optional<unknown> ? K : never }[keyof S];
type Field<F> = F extends Optional<infer T> ? T : F extends Schema<infer T> ? T : never;
type Flatten<T> = { [K in keyof T]: T[K] } & {};
export type InferShape<S extends Shape> = Flatten<
  { [K in RequiredKeys<S>]: Field<S[K]> } & { [K in OptionalKeys<S>]?: Field<S[K]> }
>;

function typeName(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  return typeof value;
}

function primitive<T>(name: string, test: (v: unknown) => boolean): Schema<T> {
  return {
    describe: name,
    check(value, path, errors) {
      if (!test(value)) errors.push(`${path}: expected ${name}, got ${typeName(value)}`);
    },
  };
}

export const str: Schema<string> = primitive("string", (v) => typeof v === "string");
export const num: Schema<number> = primitive("number", (v) => typeof v === "number" && Number.isFinite(v));
/** A non-negative integer (Rust `u32`/`u64`). */
export const int: Schema<number> = primitive(
  "integer",
  (v) => typeof v === "number" && Number.isInteger(v) && v >= 0,
);
export const bool: Schema<boolean> = primitive("boolean", (v) => typeof v === "boolean");
/** Any JSON value (`serde_json::Value`). */
export const json: Schema<unknown> = { describe: "JSON", check() {} };

export function lit<const T extends string>(value: T): Schema<T> {
  return primitive(JSON.stringify(value), (v) => v === value);
}

export function oneOf<const T extends readonly string[]>(...values: T): Schema<T[number]> {
  return primitive(values.map((v) => JSON.stringify(v)).join(" | "), (v) => values.includes(v as string));
}

export function opt<T>(schema: Schema<T>): Optional<T> {
  return { optional: schema };
}

export function arr<T>(item: Schema<T>): Schema<T[]> {
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

export interface ObjectSchema<S extends Shape> extends Schema<InferShape<S>> {
  readonly shape: S;
}

export function obj<S extends Shape>(shape: S): ObjectSchema<S> {
  return {
    shape,
    describe: `{${Object.keys(shape).join(", ")}}`,
    check(value, path, errors, strict) {
      if (typeof value !== "object" || value === null || Array.isArray(value)) {
        errors.push(`${path}: expected object, got ${typeName(value)}`);
        return;
      }
      const record = value as Record<string, unknown>;
      for (const [key, field] of Object.entries(shape)) {
        const optional = "optional" in field;
        const schema = optional ? field.optional : field;
        if (!(key in record) || record[key] === undefined) {
          if (!optional) errors.push(`${path}.${key}: missing`);
          continue;
        }
        schema.check(record[key], `${path}.${key}`, errors, strict);
      }
      if (strict) {
        for (const key of Object.keys(record)) {
          if (!(key in shape)) errors.push(`${path}.${key}: unknown field`);
        }
      }
    },
  };
}

/**
 * A union of objects told apart by the string field `tag`; members that share a `tag` value
 * are told apart by the string field `sub` (Weft's `{"type": "progress", "kind": …}`).
 */
export function tagged<const K extends string, const M extends readonly ObjectSchema<Shape>[]>(
  tag: K,
  members: M,
  sub?: string,
): Schema<Infer<M[number]>> & { readonly tags: string[]; readonly subTags: Record<string, string[]> } {
  const valueOf = (member: ObjectSchema<Shape>, key: string): string | undefined => {
    const field = member.shape[key] as Schema<string> | undefined;
    return field === undefined ? undefined : (JSON.parse(field.describe) as string);
  };
  const byTag = new Map<string, ObjectSchema<Shape>[]>();
  for (const member of members) {
    const t = valueOf(member, tag) as string;
    byTag.set(t, [...(byTag.get(t) ?? []), member]);
  }
  const subTags: Record<string, string[]> = {};
  for (const [t, group] of byTag) {
    if (group.length > 1) {
      if (sub === undefined) throw new Error(`tagged: ${tag} ${t} is shared and no sub tag tells its members apart`);
      subTags[t] = group.map((m) => valueOf(m, sub) ?? "");
    }
  }
  return {
    tags: [...byTag.keys()],
    subTags,
    describe: `one of ${[...byTag.keys()].join(", ")} by ${tag}`,
    check(value, path, errors, strict) {
      const record = typeof value === "object" && value !== null ? (value as Record<string, unknown>) : undefined;
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
export function problems<T>(schema: Schema<T>, value: unknown, strict = true): string[] {
  const errors: string[] = [];
  schema.check(value, "$", errors, strict);
  return errors;
}

/** `value` as a `T`, or an error listing what is wrong. */
export function validate<T>(schema: Schema<T>, value: unknown, strict = false): T {
  const errors = problems(schema, value, strict);
  if (errors.length > 0) throw new TypeError(`invalid ${schema.describe}: ${errors.join("; ")}`);
  return value as T;
}
