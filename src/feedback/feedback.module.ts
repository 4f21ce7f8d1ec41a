import { Module } from '@nestjs/common';
import { LimitsModule } from '../limits/limits.module';
import { FeedbackController } from './feedback.controller';
import { FeedbackRepository } from './feedback.repository';
import { FeedbackOptions, FeedbackService } from './feedback.service';

/** Session feedback (contract `POST /v1/feedback`); the learning module turns it into aggregates. */
@Module({ imports: [LimitsModule], controllers: [FeedbackController], providers: [FeedbackService, FeedbackRepository, { provide: FeedbackOptions, useValue: {} }] })
export class FeedbackModule {}
