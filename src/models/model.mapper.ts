import type { ListedModel } from './models.service';

/**
 * `created` of every model. The gateway has no creation date for a model (the catalogue is a name
 * mapped onto providers), and a time taken when the config loads would differ between replicas and
 * restarts, so two calls behind one load balancer would disagree. OpenAI clients only read it as a
 * number, so a fixed 0 ("unknown") keeps the answer the same everywhere.
 */
export const MODEL_CREATED = 0;

/** OpenAI's model object (`openai` SDK type `Model`). */
export interface ModelJson {
  id: string;
  object: 'model';
  created: number;
  owned_by: string;
}

export interface ModelListJson {
  object: 'list';
  data: ModelJson[];
}

export function toModelJson(model: ListedModel): ModelJson {
  return { id: model.id, object: 'model', created: MODEL_CREATED, owned_by: model.ownedBy };
}

export function toModelListJson(models: readonly ListedModel[]): ModelListJson {
  return { object: 'list', data: models.map(toModelJson) };
}
