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
type RequiredKeys<S extends Shape> = {
    [K in keyof S]: S[K] extends Optional<unknown> ? never : K;
}[keyof S];
type OptionalKeys<S extends Shape> = {
    [K in keyof S]: S[K] extends Optional<unknown> ? K : never;
}[keyof S];
type Field<F> = F extends Optional<infer T> ? T : F extends Schema<infer T> ? T : never;
type Flatten<T> = {
    [K in keyof T]: T[K];
} & {};
export type InferShape<S extends Shape> = Flatten<{
    [K in RequiredKeys<S>]: Field<S[K]>;
} & {
    [K in OptionalKeys<S>]?: Field<S[K]>;
}>;
export declare const str: Schema<string>;
export declare const num: Schema<number>;
/** A non-negative integer (Rust `u32`/`u64`). */
export declare const int: Schema<number>;
export declare const bool: Schema<boolean>;
/** Any JSON value (`serde_json::Value`). */
export declare const json: Schema<unknown>;
export declare function lit<const T extends string>(value: T): Schema<T>;
export declare function oneOf<const T extends readonly string[]>(...values: T): Schema<T[number]>;
export declare function opt<T>(schema: Schema<T>): Optional<T>;
export declare function arr<T>(item: Schema<T>): Schema<T[]>;
export interface ObjectSchema<S extends Shape> extends Schema<InferShape<S>> {
    readonly shape: S;
}
export declare function obj<S extends Shape>(shape: S): ObjectSchema<S>;
/**
 * A union of objects told apart by the string field `tag`; members that share a `tag` value
 * are told apart by the string field `sub` (Weft's `{"type": "progress", "kind": …}`).
 */
export declare function tagged<const K extends string, const M extends readonly ObjectSchema<Shape>[]>(tag: K, members: M, sub?: string): Schema<Infer<M[number]>> & {
    readonly tags: string[];
    readonly subTags: Record<string, string[]>;
};
/** What is wrong with `value` as a `T` (empty: nothing). Strict: unknown fields are errors. */
export declare function problems<T>(schema: Schema<T>, value: unknown, strict?: boolean): string[];
/** `value` as a `T`, or an error listing what is wrong. */
export declare function validate<T>(schema: Schema<T>, value: unknown, strict?: boolean): T;
export {};
