/** Any error class, abstract ones included. */
export type ErrorClass<E> = abstract new (...args: never[]) => E;

/** The error `fn` throws; the spec fails when it throws nothing or something other than a `type`. */
export function thrownBy<E>(fn: () => unknown, type: ErrorClass<E>): E {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(type);
    return err as E;
  }
  throw new Error(`expected a ${type.name}`);
}

/** The error `p` rejects with; the spec fails when it resolves or rejects with something other than a `type`. */
export async function rejectedWith<E>(p: Promise<unknown>, type: ErrorClass<E>): Promise<E> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(type);
    return err as E;
  }
  throw new Error(`expected a ${type.name}`);
}
