import { IsBoolean, IsInt, Max, Min, ValidateBy } from 'class-validator';
import { isSessionId, SESSION_ID_RULE } from '../../common/http/session-id';

const IsSessionId = () =>
  ValidateBy({ name: 'isSessionId', validator: { validate: isSessionId, defaultMessage: () => `session_id must be ${SESSION_ID_RULE}` } });

/**
 * Contract "Feedback request": exactly these three fields (unknown keys refused by the pipe's
 * whitelist). Decorators apply bottom-up: the type check, listed last, is the failure reported first.
 */
export class SubmitFeedbackDto {
  /** The id sent in the `gateway-session-id` header of the chat requests (same rule). */
  @IsSessionId()
  session_id!: string;

  /** NPS-style: 0–6 detractor, 7–8 passive, 9–10 promoter. */
  @Max(10)
  @Min(0)
  @IsInt({ message: 'score must be an integer from 0 to 10' })
  score!: number;

  @IsBoolean({ message: 'useful must be true or false' })
  useful!: boolean;
}
