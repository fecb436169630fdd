import { plainToInstance } from 'class-transformer';
import { getMetadataStorage, type ValidationArguments } from 'class-validator';
import type { ValidationMetadata } from 'class-validator/types/metadata/ValidationMetadata.js';

/**
 * A fast yes for payloads class-validator accepts, compiled once per payload class from
 * class-validator's own metadata: the same decorators, the same constraint functions, called
 * directly instead of through plainToInstance and the ValidationExecutor (which cost ~15 µs an
 * event). It only ever says "valid" where validateSync (whitelist, forbidNonWhitelisted,
 * forbidUnknownValues) on the transformed instance says so too; anything it does not model exactly
 * answers false, and the caller then asks class-validator, whose verdict and messages stand.
 * A class using a decorator it does not know is not compiled at all (null: always ask).
 */
export type PayloadCheck = (data: object) => boolean;

/** Built-in constraints whose verdict depends only on the value and the decorator's constraints. */
const PURE_CONSTRAINTS = new Set([
  'isString', 'isInt', 'isNumber', 'isBoolean', 'min', 'max', 'minLength', 'maxLength', 'matches', 'isIn',
  'isArray', 'arrayMaxSize', 'arrayMinSize', 'isObject', 'isNotEmpty', 'isPositive', 'isEnum',
]);

const compiled = new Map<Function, PayloadCheck | null>();

/** The compiled check of a payload class, or null when it cannot be compiled exactly. */
export function payloadCheck(cls: Function): PayloadCheck | null {
  if (!compiled.has(cls)) {
    compiled.set(cls, null); // a class that nests itself is not compiled
    compiled.set(cls, compile(cls));
  }
  return compiled.get(cls)!;
}

type ValueCheck = (object: Record<string, unknown>, value: unknown) => boolean;

class Unsupported extends Error {}

function compile(cls: Function): PayloadCheck | null {
  try {
    return compileClass(cls);
  } catch (error) {
    if (error instanceof Unsupported) return null;
    throw error;
  }
}

function compileClass(cls: Function): PayloadCheck {
  const storage = getMetadataStorage();
  // As ValidationExecutor.execute asks for them (no schema, groups or `always` in our options).
  const metadatas = storage.getTargetValidationMetadatas(cls, undefined as unknown as string, false, false, undefined);
  if (!metadatas.length) throw new Unsupported(); // forbidUnknownValues refuses it
  if (Object.keys(new (cls as new () => object)()).length) throw new Unsupported(); // initialised fields become instance keys
  const grouped = storage.groupByPropertyName(metadatas);
  const properties = new Map<string, ValueCheck>();
  for (const [property, list] of Object.entries(grouped)) {
    if (!list.length) continue;
    assertUntransformed(cls, property, list);
    properties.set(property, propertyCheck(cls, property, list));
  }
  const entries = [...properties];
  return (data) => {
    if (!isPlainObject(data)) return false;
    const object = data as Record<string, unknown>;
    for (const key of Object.keys(object)) if (!properties.has(key)) return false; // forbidNonWhitelisted
    for (const [property, check] of entries) if (!check(object, object[property])) return false;
    return true;
  };
}

/** class-transformer leaves the property's value as it is (only nested classes are converted, and those are checked as such). */
function assertUntransformed(cls: Function, property: string, list: ValidationMetadata[]): void {
  if (list.some((m) => m.type === 'nestedValidation')) return;
  for (const probe of ['x', 1, true, null, ['x'], { x: 1 }]) {
    const out = (plainToInstance(cls as new () => object, { [property]: probe }) as Record<string, unknown>)[property];
    const same = typeof probe === 'object' && probe !== null ? JSON.stringify(out) === JSON.stringify(probe) && isPlainOrArray(out) : out === probe;
    if (!same) throw new Unsupported();
  }
}

function propertyCheck(cls: Function, property: string, list: ValidationMetadata[]): ValueCheck {
  const storage = getMetadataStorage();
  const conditions: Array<(object: object, value: unknown) => boolean> = [];
  const customs: ValueCheck[] = [];
  let nested: ((value: unknown) => boolean) | null = null;
  for (const m of list) {
    if (m.type === 'conditionalValidation') conditions.push(m.constraints[0] as (object: object, value: unknown) => boolean);
    else if (m.type === 'customValidation') customs.push(customCheck(cls, property, m, storage.getTargetValidatorConstraints(m.constraintCls)));
    else if (m.type === 'nestedValidation') nested = nestedCheck(cls, property);
    else throw new Unsupported();
  }
  return (object, value) => {
    let canValidate = true;
    for (const condition of conditions) canValidate = condition(object, value) && canValidate;
    if (!canValidate) return true;
    for (const custom of customs) if (!custom(object, value)) return false;
    return nested === null || nested(value);
  };
}

function customCheck(cls: Function, property: string, m: ValidationMetadata, constraints: ReturnType<ReturnType<typeof getMetadataStorage>['getTargetValidatorConstraints']>): ValueCheck {
  if (m.validateIf || !constraints.length || constraints.some((c) => c.async || !PURE_CONSTRAINTS.has(c.name))) throw new Unsupported();
  const validators = constraints.map((c) => c.instance as { validate(value: unknown, args: ValidationArguments): unknown });
  const valid = (object: object, value: unknown, subject: unknown) => {
    const args: ValidationArguments = { targetName: cls.name, property, object, value, constraints: m.constraints };
    return validators.every((v) => v.validate(subject, args) === true);
  };
  return (object, value) => (m.each && Array.isArray(value) ? value.every((item) => valid(object, value, item)) : valid(object, value, value));
}

/** ValidateNested: undefined passes, a plain object is checked as the @Type class, an array item by item. */
function nestedCheck(cls: Function, property: string): (value: unknown) => boolean {
  const target = (plainToInstance(cls as new () => object, { [property]: {} }) as Record<string, unknown>)[property];
  const type = target && typeof target === 'object' ? target.constructor : null;
  if (!type || type === Object) throw new Unsupported(); // no @Type: forbidUnknownValues refuses the plain object
  const one = (value: unknown) => isPlainObject(value) && payloadCheck(type)!(value as object);
  return (value) => {
    if (payloadCheck(type) === null) return false;
    if (value === undefined) return true;
    if (Array.isArray(value)) return value.every((item) => item !== undefined && !Array.isArray(item) && one(item));
    return one(value);
  };
}

function isPlainObject(value: unknown): boolean {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype;
}

function isPlainOrArray(value: unknown): boolean {
  return Array.isArray(value) || isPlainObject(value);
}
